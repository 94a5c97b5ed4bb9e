"""Access matrix: owner / member (researcher, labeler) / outsider / anonymous / staff × every read endpoint."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from .conftest import token_client

pytestmark = pytest.mark.django_db

ROLES = ("owner", "researcher", "labeler", "outsider", "anonymous", "staff")
# endpoint -> expected status per role (the id placeholders are filled from the fixtures)
MATRIX = {
    "/api/campaigns/": (200, 200, 200, 200, 401, 200),
    "/api/campaigns/{campaign}/": (200, 200, 200, 404, 401, 200),
    "/api/problems/": (200, 200, 200, 200, 401, 200),
    "/api/solutions/": (200, 200, 200, 200, 401, 200),
    "/api/solutions/{solution}/": (200, 200, 404, 404, 401, 200),
    "/api/labels/": (200, 200, 200, 200, 401, 200),
    "/api/labels/{label}/": (200, 200, 404, 404, 401, 200),
    "/api/datasets/": (200, 200, 200, 200, 401, 200),
    "/api/datasets/{version}/": (200, 200, 403, 404, 401, 200),
    "/api/datasets/{version}/files/trl-stepwise/": (200, 200, 403, 404, 401, 200),
    "/api/datasets/{version}/files/card/": (200, 200, 403, 404, 401, 200),
    "/api/campaigns/{campaign}/metrics/": (200, 200, 403, 404, 401, 200),
}
# list endpoints: how many of the campaign's rows each role sees
VISIBLE = {"/api/solutions/": 24, "/api/labels/": 24, "/api/problems/": 12, "/api/datasets/": 1}


def _client(people, role: str) -> APIClient:
    if role == "anonymous":
        return APIClient()
    client, _ = token_client(people[role])
    return client


@pytest.mark.parametrize("role", ROLES)
def test_access_matrix(role: str, people, version, math500_campaign) -> None:
    ids = {"campaign": math500_campaign.pk, "version": version.pk,
           "solution": math500_campaign.solutions.order_by("pk").first().pk,
           "label": math500_campaign.solutions.order_by("pk").first().assignments.first().pk}
    client = _client(people, role)
    failures = []
    for template, expected in MATRIX.items():
        url = template.format(**ids)
        response = client.get(url)
        want = expected[ROLES.index(role)]
        if response.status_code != want:
            failures.append(f"{url}: {response.status_code} != {want}")
            continue
        if want == 200 and template in VISIBLE:
            count = response.json()["count"]
            sees = role in ("owner", "researcher", "staff")
            if count != (VISIBLE[template] if sees else 0):
                failures.append(f"{url}: {role} sees {count} rows")
    assert not failures, failures


def test_labeler_dataset_refusal_says_why(people, version) -> None:
    client, _ = token_client(people["labeler"])
    response = client.get(f"/api/datasets/{version.pk}/files/prm800k/")
    assert response.status_code == 403 and "Labelers cannot" in response.json()["detail"]


def test_session_auth_works_for_the_browser(people, version) -> None:
    client = APIClient()
    client.force_login(people["researcher"])
    assert client.get(f"/api/datasets/{version.pk}/").json()["number"] == 1
    page = client.get("/api/researcher/datasets/")
    html = page.content.decode()
    assert page.status_code == 200 and f'data-dataset-version="{version.pk}"' in html
    assert f'/api/datasets/{version.pk}/files/trl-stepwise-parquet/' in html
    assert '<td data-count="assignments">24</td>' in html
    client.force_login(people["labeler"])
    assert f'data-dataset-version="{version.pk}"' not in client.get("/api/researcher/datasets/").content.decode()


def test_bad_filters_name_the_field(people) -> None:
    client, _ = token_client(people["researcher"])
    response = client.get("/api/solutions/?campaign=abc&updated_since=yesterday")
    assert response.status_code == 400
    assert set(response.json()) == {"campaign", "updated_since"}
    assert client.get("/api/datasets/?campaign=x").json() == {"campaign": ["must be a campaign id (an integer)"]}


def test_campaign_metrics_are_the_dashboard_figures(people, math500_campaign) -> None:
    from annotate.services.agreement import compute_campaign_metrics
    from annotate.services.campaigns import campaign_progress

    api, _ = token_client(people["researcher"])
    before = api.get(f"/api/campaigns/{math500_campaign.pk}/metrics/").json()
    progress = campaign_progress(math500_campaign)
    assert before["progress"]["totals"]["total"] == progress.totals.total > 0
    assert before["progress"]["totals"]["done"] == progress.totals.done
    assert before["progress"]["finish_reasons"] == progress.finish_reasons
    assert before["quality"] is None and before["quality_computed_at"] is None
    snapshot = compute_campaign_metrics(math500_campaign)
    after = api.get(f"/api/campaigns/{math500_campaign.pk}/metrics/").json()
    assert after["quality"] == type(snapshot).objects.get(pk=snapshot.pk).data and after["quality_computed_at"]

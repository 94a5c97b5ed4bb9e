"""Who may start labeling rounds (button and API), the old start path as an alias, the dashboard's labeling-round
figures and its query count."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(personas, hand_pool):
    return personas(hand_pool.campaign)


@pytest.mark.parametrize("who, button, api_post, api_get", [
    ("staff", 302, 201, 200), ("owner", 302, 201, 200), ("researcher", 403, 403, 200),
    ("labeler", 403, 404, 404), ("outsider", 403, 404, 404), ("other_admin", 404, 404, 404),
])
def test_only_admins_and_staff_start_generations(client, users, hand_pool, who, button, api_post, api_get) -> None:
    from rewards.jobs.models import LabelingRound

    slug = hand_pool.campaign.slug
    client.force_login(users[who])
    response = client.post(f"/models/dashboard/{slug}/labeling-rounds/start/",
                           {"strategy": "convincing_wrong", "batch_size": "2", "config": '{"max_per_problem": 1}'})
    assert response.status_code == button
    assert LabelingRound.objects.count() == (1 if button == 302 else 0)
    LabelingRound.objects.all().delete()
    response = client.post(f"/models/api/campaigns/{slug}/generations/",
                           {"strategy": "uncertain", "batch_size": 3}, content_type="application/json")
    assert response.status_code == api_post, response.content
    if api_post == 201:
        body = response.json()
        assert (body["number"], body["status"], body["strategy"], body["strategy_config"]) == (
            1, "scoring", "uncertain", {"target": 0.5, "max_per_problem": None})
        assert LabelingRound.objects.get().created_by == users[who]
    assert client.get(f"/models/api/campaigns/{slug}/generations/").status_code == api_get
    page = client.get(f"/models/dashboard/{slug}/")
    if page.status_code == 200:
        assert ("data-start-generation" in page.content.decode()) == (button == 302)


def test_anonymous_and_tokens(client, users, hand_pool) -> None:
    from api.services import create_token

    url = f"/models/api/campaigns/{hand_pool.campaign.slug}/generations/"
    assert client.post(url, {"strategy": "random", "batch_size": 1}, content_type="application/json").status_code == 401
    start = f"/models/dashboard/{hand_pool.campaign.slug}/labeling-rounds/start/"
    assert client.post(start).status_code == 302  # to the login page
    _, read = create_token(users["owner"], name="read", scope="read")
    _, write = create_token(users["owner"], name="write", scope="write")
    body = {"strategy": "random", "batch_size": 1}
    assert client.post(url, body, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {read}").status_code == 403
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {read}").status_code == 200
    assert client.post(url, body, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {write}").status_code == 201
    again = client.post(url, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {write}")
    assert again.status_code == 409 and "still scoring" in again.json()["campaign"][0]


def test_bad_input_names_the_field(client, users, hand_pool) -> None:
    slug = hand_pool.campaign.slug
    client.force_login(users["owner"])
    url = f"/models/api/campaigns/{slug}/generations/"
    bad = client.post(url, {"strategy": "mixed", "batch_size": 4, "config": {"convincing_share": 2}},
                      content_type="application/json")
    assert bad.status_code == 400 and "config key 'convincing_share'" in bad.json()["config"][0]
    assert "strategy" in client.post(url, {"strategy": "nope", "batch_size": 4},
                                     content_type="application/json").json()
    assert "batch_size" in client.post(url, {"strategy": "random", "batch_size": 0},
                                       content_type="application/json").json()
    assert "pool" in client.post(url, {"strategy": "random", "batch_size": 1, "pool": 999999},
                                 content_type="application/json").json()
    page = client.post(f"/models/dashboard/{slug}/labeling-rounds/start/",
                       {"strategy": "uncertain", "batch_size": "2", "config": "{max"})
    assert page.status_code == 400 and 'data-error-for="config"' in page.content.decode()
    page = client.post(f"/models/dashboard/{slug}/labeling-rounds/start/", {"strategy": "uncertain", "batch_size": "x"})
    assert page.status_code == 400 and 'data-error-for="batch_size"' in page.content.decode()


def test_the_old_start_path_is_a_deprecated_alias(client, users, hand_pool) -> None:
    """The dashboard's form posts to ``labeling-rounds/start/``; ``generations/start/`` (and its URL name) still
    starts a round the same way, for forms and scripts made before the rename."""
    from django.urls import reverse

    from rewards.jobs.models import LabelingRound

    slug = hand_pool.campaign.slug
    current, alias = f"/models/dashboard/{slug}/labeling-rounds/start/", f"/models/dashboard/{slug}/generations/start/"
    assert (reverse("jobs:labeling_round_start", args=[slug]), reverse("jobs:generation_start", args=[slug])) == (
        current, alias)
    client.force_login(users["owner"])
    assert f'action="{current}" data-start-generation' in client.get(f"/models/dashboard/{slug}/").content.decode()
    refused = client.post(alias, {"strategy": "uncertain", "batch_size": "x"})
    assert refused.status_code == 400 and 'data-error-for="batch_size"' in refused.content.decode()
    response = client.post(alias, {"strategy": "convincing_wrong", "batch_size": "2"})
    assert (response.status_code, response["Location"]) == (302, f"/models/dashboard/{slug}/")
    assert list(LabelingRound.objects.values_list("number", "strategy", "created_by")) == [
        (1, "convincing_wrong", users["owner"].pk)]


def _label(campaign, labeler, *, errors: int, accepts: int) -> None:
    from annotate.services import labeling, leases

    for value in [-1] * errors + [1] * accepts:
        assignment = leases.lease_next_solution(campaign, labeler).assignment
        for index in range(3):
            if labeling.record_rating(assignment.pk, user=labeler, step_index=index, rating=value).found_error:
                break
        labeling.submit_assignment(assignment.pk, user=labeler)  # found_error after a −1, else solution


def test_dashboard_shows_each_generation_with_flat_queries(client, users, hand_pool, make_user) -> None:
    from annotate.models import Role
    from tests.factories import DatasetVersionFactory, MembershipFactory
    from tests.labeling_rounds.conftest import make_prm

    campaign = hand_pool.campaign
    labeler = make_user("dash-labeler")
    MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER)
    client.force_login(users["researcher"])
    url = f"/models/dashboard/{campaign.slug}/"
    hand_pool.run("convincing_wrong", 3)
    _label(campaign, labeler, errors=1, accepts=1)
    version = DatasetVersionFactory(campaign=campaign, number=1, status="ready", content_sha256="v1" * 8,
                                    folder="v1")
    retrained = make_prm(campaign, auroc=0.812, version=version, name="PRM after g1")
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    hand_pool.run("mixed", 2)
    hand_pool.run("random", 2, {"seed": 1})
    hand_pool.run("uncertain", 1)
    with CaptureQueriesContext(connection) as four:
        html = client.get(url).content.decode()
    assert len(four) == len(one), [q["sql"] for q in four.captured_queries]
    assert html.count("data-generation=") == 4
    rows = client.get(f"/models/dashboard/{campaign.slug}/figures/generations.json").json()["rows"]
    first = rows[0]
    assert (first["generation"], first["selected"], first["labeled"], first["convincing_wrong_labeled"],
            first["found_error"], first["found_error_share"]) == (1, 3, 2, 2, 1, 0.5)
    assert first["retrained"] == {"model": "PRM after g1", "model_id": retrained.pk, "step_auroc": 0.812,
                                  "solution_accuracy": 0.6}
    assert first["retrained_on"] == "v1" and first["chosen_by"] == "hand PRM"
    assert [r["retrained"] for r in rows[1:]] == [None, None, None]  # v1 was cut before g2 started
    assert [r["strategy"] for r in rows] == ["convincing_wrong", "mixed", "random", "uncertain"]
    api = client.get(f"/models/api/campaigns/{campaign.slug}/generations/").json()
    assert [g["figures"]["labeled"] for g in api] == [2, 0, 0, 0]


def test_periodic_task_starts_the_next_generation_once_mostly_labeled(hand_pool, make_user, settings) -> None:
    from annotate.models import Role
    from rewards.jobs.models import LabelingRound
    from rewards.jobs.services.labeling_rounds import auto_start_labeling_rounds
    from tests.factories import MembershipFactory

    settings.STEPLAB_LABELING_ROUND_AUTO_LABELED_SHARE = 0.6
    campaign = hand_pool.campaign
    assert auto_start_labeling_rounds() == []  # no first generation: an admin starts it
    first = hand_pool.run("convincing_wrong", 3, {"max_per_problem": 1})
    labeler = make_user("auto-labeler")
    MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER)
    _label(campaign, labeler, errors=1, accepts=0)
    assert auto_start_labeling_rounds() == []  # 1 of 3 labeled < 0.6
    _label(campaign, labeler, errors=0, accepts=1)
    started = auto_start_labeling_rounds()
    assert [g.number for g in started] == [2]
    second = LabelingRound.objects.get(number=2, campaign=campaign)
    assert (second.auto_started, second.strategy, second.strategy_config, second.batch_size, second.status) == (
        True, "convincing_wrong", first.strategy_config, 3, "scoring")
    assert auto_start_labeling_rounds() == []  # still scoring: nothing new

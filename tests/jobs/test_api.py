"""The training-job REST API: start, list, read, cancel — tokens and scopes, access, errors naming the field."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from api.services import create_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher_api(researcher):
    def client(scope: str) -> APIClient:
        _, raw = create_token(researcher, name=scope, scope=scope)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return api

    return client


def test_start_read_list_and_cancel_with_a_token(researcher_api, dataset_version, settings, tmp_path,
                                                 django_capture_on_commit_callbacks) -> None:
    from rewards.jobs.models import TrainingJob

    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    body = {"kind": "prm", "dataset_version": dataset_version.pk, "hyper": {"max_steps": 3, "learning_rate": 1e-4}}
    assert researcher_api("read").post("/models/api/jobs/", body, format="json").status_code == 403, "read scope"
    api = researcher_api("write")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        started = api.post("/models/api/jobs/", body, format="json")
    assert started.status_code == 201, started.content
    assert len(callbacks) == 1, "the watcher task goes out after commit"
    job = started.json()
    assert (job["kind"], job["status"], job["campaign"], job["dataset_version"]) == (
        "prm", "queued", dataset_version.campaign.slug, dataset_version.pk)
    assert job["config"]["max_steps"] == 3 and job["config"]["learning_rate"] == 1e-4
    assert TrainingJob.objects.get(pk=job["id"]).started_by.username.startswith("res-")

    listed = api.get(f"/models/api/jobs/?campaign={dataset_version.campaign.slug}&status=queued").json()
    assert [row["id"] for row in listed] == [job["id"]]
    assert api.get("/models/api/jobs/?status=running").json() == []
    assert api.get("/models/api/jobs/?status=nonsense").status_code == 400
    detail = api.get(f"/models/api/jobs/{job['id']}/").json()
    assert detail["curve"] == [] and detail["reward_model"] is None
    cancelled = api.post(f"/models/api/jobs/{job['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


@pytest.mark.parametrize("change, field", [
    ({"hyper": {"lerning_rate": 1}}, "lerning_rate"),
    ({"hyper": {"max_steps": -2}}, "max_steps"),
    ({"kind": "crm"}, "kind"),
    ({"dataset_version": 999999}, "dataset_version"),
    ({"base_model": "gpt-17"}, "base_model"),
])
def test_bad_requests_name_the_field(researcher_api, dataset_version, change, field: str) -> None:
    from rewards.jobs.models import TrainingJob

    body = {"kind": "orm", "dataset_version": dataset_version.pk, **change}
    response = researcher_api("write").post("/models/api/jobs/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert not TrainingJob.objects.exists()


def test_other_campaigns_jobs_are_not_found_and_labelers_are_refused(make_user, dataset_version,
                                                                     campaign_factory) -> None:
    from annotate.models import Role
    from tests.factories import MembershipFactory, TrainingJobFactory

    job = TrainingJobFactory(kind="prm", campaign=dataset_version.campaign, dataset_path="/x.jsonl")
    stranger = make_user("stranger")
    MembershipFactory(campaign=campaign_factory("elsewhere"), user=stranger, role=Role.RESEARCHER)
    labeler = make_user("lab")
    MembershipFactory(campaign=dataset_version.campaign, user=labeler, role=Role.LABELER)
    api = APIClient()
    api.force_authenticate(stranger)
    assert api.get(f"/models/api/jobs/{job.pk}/").status_code == 404
    assert api.post(f"/models/api/jobs/{job.pk}/cancel/").status_code == 404
    assert api.get("/models/api/jobs/").json() == []
    started = api.post("/models/api/jobs/", {"kind": "prm", "dataset_version": dataset_version.pk}, format="json")
    assert started.status_code == 400 and "dataset_version" in started.json()
    api.force_authenticate(labeler)
    assert api.get("/models/api/jobs/").status_code == 403
    assert APIClient().get("/models/api/jobs/").status_code in (401, 403)


def test_under_api_campaigns_are_ids_and_lists_are_pages(researcher_api, dataset_version, settings,
                                                        tmp_path) -> None:
    """The same jobs at /api/ in the API's one style; /models/api/ still answers with slugs and a plain list."""
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    campaign = dataset_version.campaign
    api = researcher_api("write")
    started = api.post("/api/jobs/", {"kind": "prm", "dataset_version": dataset_version.pk}, format="json")
    assert started.status_code == 201, started.content
    assert started.json()["campaign"] == campaign.pk
    second = api.post("/api/jobs/", {"kind": "orm", "dataset_version": dataset_version.pk}, format="json").json()

    page = api.get(f"/api/jobs/?campaign={campaign.pk}&limit=1").json()
    assert page["count"] == 2 and [row["id"] for row in page["results"]] == [second["id"]] and page["next"]
    assert api.get(f"/api/jobs/?campaign={campaign.slug}").status_code == 400, "campaigns are ids here"
    assert api.get(f"/api/jobs/{second['id']}/").json()["campaign"] == campaign.pk
    old = api.get(f"/models/api/jobs/?campaign={campaign.slug}").json()
    assert [row["campaign"] for row in old] == [campaign.slug, campaign.slug]

    comparisons = api.get(f"/api/campaigns/{campaign.pk}/comparisons/").json()
    assert comparisons == {"count": 0, "next": None, "previous": None, "results": []}
    assert api.get(f"/api/campaigns/{campaign.slug}/comparisons/").status_code == 404
    assert api.get(f"/models/api/campaigns/{campaign.slug}/comparisons/").json() == []

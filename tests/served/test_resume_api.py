"""The jobs API takes a served endpoint for sampling and Monte-Carlo labeling (one the user may use, else a 400
naming ``endpoint``), and a stopped sampling or Monte-Carlo job can be resumed from its work page and the API.
No server is needed: the jobs are queued, never run."""
from __future__ import annotations

from typing import Any

import pytest

from annotate.permissions import SYSTEM
from rewards.jobs.models import JobStatus, MachineLabelingJob, SamplingJob
from rewards.jobs.services.sampling import start_sampling_job

pytestmark = pytest.mark.django_db


def test_the_api_starts_on_a_usable_endpoint_and_refuses_another(client, served_campaign: Any,
                                                                  django_capture_on_commit_callbacks) -> None:
    campaign, people, ours, theirs = served_campaign
    client.force_login(people.owner)
    sampling, labeling = f"/api/campaigns/{campaign.pk}/sampling/", f"/api/campaigns/{campaign.pk}/machine-labeling/"
    with django_capture_on_commit_callbacks(execute=False):
        for url, body in ((sampling, {"config": {"n": 2}}), (labeling, {"method": "mc", "solutions": 1})):
            refused = client.post(url, {**body, "endpoint": theirs.pk}, content_type="application/json")
            assert refused.status_code == 400 and "endpoint" in refused.json(), refused.content
            assert f"no endpoint {theirs.pk}" in refused.json()["endpoint"][0]
        assert not SamplingJob.objects.exists() and not MachineLabelingJob.objects.exists()
        for url, body in ((sampling, {"config": {"n": 2}}), (labeling, {"method": "mc", "solutions": 1})):
            started = client.post(url, {**body, "endpoint": ours.pk}, content_type="application/json")
            assert started.status_code == 201, started.content
            assert started.json()["config"]["endpoint"] == ours.pk
            assert started.json()["config"]["backend"] == "served"


def test_a_job_that_has_not_stopped_is_not_resumed(client, served_campaign: Any) -> None:
    campaign, people, _, _ = served_campaign
    client.force_login(people.owner)
    queued = SamplingJob.objects.create(campaign=campaign)
    prm = MachineLabelingJob.objects.create(campaign=campaign, method="prm", status=JobStatus.FAILED)
    answer = client.post(f"/api/sampling/{queued.pk}/resume/")
    assert answer.status_code == 409 and "has not stopped" in answer.json()["job"][0]
    answer = client.post(f"/api/machine-labeling/{prm.pk}/resume/")
    assert answer.status_code == 409 and "scores with a PRM" in answer.json()["job"][0]
    page = client.post(f"/models/sampling/{queued.pk}/resume/")
    assert page.status_code == 409 and "has not stopped" in page.content.decode()
    assert SamplingJob.objects.count() == 1 and MachineLabelingJob.objects.count() == 1


def test_the_work_page_offers_resume_to_those_who_start_jobs_and_resumes(
        client, served_campaign: Any, django_capture_on_commit_callbacks) -> None:
    campaign, people, _, _ = served_campaign
    with django_capture_on_commit_callbacks(execute=False):
        job = start_sampling_job(campaign, config={"n": 2}, user=SYSTEM)
    page = f"/models/sampling/{job.pk}/"
    client.force_login(people.owner)
    assert 'data-action="resume"' not in client.get(page).content.decode()  # queued
    SamplingJob.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
    assert 'data-action="resume"' in client.get(page).content.decode()
    client.force_login(people.researcher)
    assert 'data-action="resume"' not in client.get(page).content.decode()
    assert client.post(f"{page}resume/").status_code == 403
    client.force_login(people.owner)
    with django_capture_on_commit_callbacks(execute=False):
        answer = client.post(f"{page}resume/")
    resumed = SamplingJob.objects.exclude(pk=job.pk).get()
    assert answer.status_code == 302 and answer["Location"] == f"/models/sampling/{resumed.pk}/"
    assert resumed.summary == {"resumed_from": job.pk} and resumed.status == JobStatus.QUEUED

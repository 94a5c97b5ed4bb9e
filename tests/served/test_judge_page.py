"""The LLM judge's page: who may start and resume a judge job, the form's refusals (4xx, nothing queued), and the
job's work page. No request reaches a server here: the job's task is not run."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotate.models import Role
from annotate.permissions import SYSTEM
from endpoints.services import register_endpoint
from rewards.jobs.models import JobStatus, LlmJudgeJob
from tests.factories import numbered_solution

pytestmark = pytest.mark.django_db


@pytest.fixture
def setting(settings, campaign_factory, member):
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    campaign = campaign_factory()
    for _ in range(3):
        numbered_solution(campaign, 2)
    endpoint = register_endpoint(SYSTEM, campaign=campaign, name="judge", base_url="http://127.0.0.1:9/v1",
                                 model="m", token_budget=1000)
    return campaign, endpoint, member(campaign, "owner", Role.ADMIN), member(campaign, "ann", Role.RESEARCHER)


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_starts_a_judge_job_from_the_page(setting) -> None:
    campaign, endpoint, owner, _ = setting
    url = reverse("jobs:llm_judge_start", args=[campaign.slug])
    page = client_of(owner).get(url)
    assert page.status_code == 200 and b"data-start-llm-judge" in page.content
    answer = client_of(owner).post(url, {"endpoint": endpoint.pk, "solutions": 2, "max_tokens": 64, "template": ""})
    job = LlmJudgeJob.objects.get()
    assert answer.status_code == 302 and answer["Location"] == job.get_absolute_url()
    assert (job.source, job.solution_count, job.token_budget, job.queue_name()) == ("m@processbench-v1", 2, 1000,
                                                                                    "gpu")
    work = client_of(owner).get(job.get_absolute_url())
    assert work.status_code == 200 and b"0 of 2 solutions" in work.content
    listed = client_of(owner).get(url)
    assert f'data-llm-judge-job="{job.pk}"'.encode() in listed.content


@pytest.mark.parametrize(("data", "message"), [
    ({"solutions": 0, "max_tokens": 64}, b"solutions"),
    ({"solutions": 2, "max_tokens": 64, "template": "v9"}, b"template"),
    ({"solutions": 2, "max_tokens": 10**6}, b"max_tokens"),
])
def test_bad_input_is_a_400_and_queues_nothing(setting, data, message) -> None:
    campaign, endpoint, owner, _ = setting
    answer = client_of(owner).post(reverse("jobs:llm_judge_start", args=[campaign.slug]),
                                   {"endpoint": endpoint.pk, **data})
    assert answer.status_code == 400 and message in answer.content
    assert not LlmJudgeJob.objects.exists()


def test_a_researcher_sees_the_jobs_but_starts_and_resumes_none(setting) -> None:
    campaign, endpoint, _, researcher = setting
    url = reverse("jobs:llm_judge_start", args=[campaign.slug])
    page = client_of(researcher).get(url)
    assert page.status_code == 200 and b"data-start-llm-judge" not in page.content
    assert client_of(researcher).post(url, {"endpoint": endpoint.pk, "solutions": 1,
                                            "max_tokens": 8}).status_code == 403
    job = LlmJudgeJob.objects.create(campaign=campaign, endpoint=endpoint, source="m@processbench-v1",
                                     template_version="processbench-v1", status=JobStatus.FAILED, resumable=True)
    resume = reverse("jobs:llm_judge_resume", args=[campaign.slug, job.pk])
    assert client_of(researcher).post(resume).status_code == 403


def test_only_a_stopped_job_with_work_left_resumes(setting) -> None:
    campaign, endpoint, owner, _ = setting
    job = LlmJudgeJob.objects.create(campaign=campaign, endpoint=endpoint, source="m@processbench-v1",
                                     template_version="processbench-v1", status=JobStatus.SUCCEEDED)
    resume = reverse("jobs:llm_judge_resume", args=[campaign.slug, job.pk])
    assert client_of(owner).post(resume).status_code == 409
    LlmJudgeJob.objects.filter(pk=job.pk).update(status=JobStatus.FAILED, resumable=True, tokens_used=900,
                                                 token_budget=1000)
    assert client_of(owner).post(resume).status_code == 302
    job.refresh_from_db()
    assert (job.status, job.resumable, job.token_budget) == (JobStatus.QUEUED, False, 1900)
    assert client_of(owner).post(resume).status_code == 409


def test_the_dashboard_leads_those_who_may_start_a_judge_job_to_its_page(setting) -> None:
    campaign, _, owner, researcher = setting
    dashboard = reverse("jobs:campaign_dashboard", args=[campaign.slug])
    judge = reverse("jobs:llm_judge_start", args=[campaign.slug]).encode()
    page = client_of(owner).get(dashboard)
    assert page.status_code == 200 and b"data-llm-judge-entry" in page.content and judge in page.content
    assert b"data-no-endpoint" not in page.content
    seen = client_of(researcher).get(dashboard)
    assert seen.status_code == 200 and b"data-llm-judge-entry" not in seen.content and judge not in seen.content


def test_a_labeler_is_shown_no_way_to_the_judge(setting, member) -> None:
    campaign = setting[0]
    labeler = member(campaign, "lab", Role.LABELER)
    page = client_of(labeler).get(reverse("jobs:campaign_dashboard", args=[campaign.slug]))
    assert b"data-llm-judge-entry" not in page.content
    assert reverse("jobs:llm_judge_start", args=[campaign.slug]).encode() not in page.content


def test_without_a_usable_endpoint_the_dashboard_sends_an_admin_to_register_one(setting) -> None:
    campaign, endpoint, owner, _ = setting
    endpoint.delete()
    page = client_of(owner).get(reverse("jobs:campaign_dashboard", args=[campaign.slug]))
    assert b"data-no-endpoint" in page.content
    assert reverse("endpoints:campaign", args=[campaign.slug]).encode() in page.content

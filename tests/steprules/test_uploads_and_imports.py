"""A catastrophic pattern wherever a user can supply one — the pool upload page and API, the solutions import
page and API, a campaign's stored rule used by an import job — answers at once (RE2); a rule RE2 refuses is a 400
naming the rule, never a 500; and an API import without a rule uses the campaign's."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotate.models import Campaign, ImportJob, Problem, Role, Solution
from annotate.services.campaigns import CampaignAdminError, update_campaign
from rewards.jobs.models import Candidate, CandidatePool
from steplab.jobs import JobStatus
from tests.factories import MembershipFactory, SolutionFactory
from tests.waiting import wait_for

from .test_rules_and_patterns import CATASTROPHIC, VICTIM

BACKREFERENCE = "regex:(a)\\1"


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


@pytest.fixture
def admin_client(client, campaign_factory, make_user, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    campaign = campaign_factory("rules")
    boss = make_user("boss")
    MembershipFactory(campaign=campaign, user=boss, role=Role.ADMIN)
    Problem.objects.create(campaign=campaign, text="How many a's?", answer="31", source_id="p1")
    client.force_login(boss)
    return client, campaign


def _pool_line() -> bytes:
    return jsonl([{"problem": "How many a's?", "solution": VICTIM, "ground_truth": "31"}])


@pytest.mark.django_db
@pytest.mark.both_databases  # the probe froze the demo (SQLite) this way
def test_pool_upload_page_runs_a_catastrophic_rule_at_once(admin_client, no_hang) -> None:
    client, campaign = admin_client
    with no_hang():
        response = client.post(reverse("jobs:pool_upload", args=[campaign.slug]), {
            "file": SimpleUploadedFile("pool.jsonl", _pool_line()), "name": "p", "split_rule": CATASTROPHIC})
    assert response.status_code == 302, response.content.decode()[:800]
    pool = CandidatePool.objects.get(name="p")
    assert pool.split_rule == CATASTROPHIC
    assert Candidate.objects.get(pool_problem__pool=pool).steps == [VICTIM]


@pytest.mark.django_db
def test_pool_upload_api_takes_a_regex_rule_and_refuses_one_re2_cannot_take(admin_client, no_hang) -> None:
    client, campaign = admin_client
    url = reverse("jobs:api_pools", args=[campaign.slug])
    with no_hang():
        done = client.post(url, {"file": SimpleUploadedFile("pool.jsonl", _pool_line()), "name": "api",
                                 "split_rule": CATASTROPHIC})
    assert done.status_code == 201, done.content.decode()[:800]
    assert CandidatePool.objects.get(name="api").split_rule == CATASTROPHIC
    refused = client.post(url, {"file": SimpleUploadedFile("pool.jsonl", _pool_line()), "name": "bad",
                                "split_rule": BACKREFERENCE})
    assert refused.status_code == 400 and "RE2" in refused.json()["split_rule"][0]
    assert not CandidatePool.objects.filter(name="bad").exists()


@pytest.mark.django_db
def test_api_import_takes_a_regex_rule_and_without_one_uses_the_campaigns(admin_client, no_hang) -> None:
    client, campaign = admin_client
    url = f"/api/campaigns/{campaign.pk}/import-solutions/"
    with no_hang():
        regex = client.post(url, {"file": SimpleUploadedFile("s.jsonl", jsonl(
            [{"problem_id": "p1", "solution": VICTIM, "answer": "31"}])), "split_rule": CATASTROPHIC})
    assert regex.status_code == 201, regex.content.decode()[:800]
    assert [step.index for step in Solution.objects.get(campaign=campaign).steps.all()] == [0]

    Campaign.objects.filter(pk=campaign.pk).update(step_rule="sentence")
    default = client.post(url, {"file": SimpleUploadedFile("s.jsonl", jsonl(
        [{"problem_id": "p1", "solution": "First we count. Then we add. So 31.", "answer": "31"}]))})
    assert default.status_code == 201, default.content.decode()[:800]
    latest = Solution.objects.filter(campaign=campaign).latest("id")
    assert latest.steps.count() == 3  # the campaign's sentence rule; "auto" would keep one paragraph

    refused = client.post(url, {"file": SimpleUploadedFile("s.jsonl", b"{}\n"), "split_rule": BACKREFERENCE})
    assert refused.status_code == 400 and "RE2" in refused.json()["split_rule"][0]


@pytest.mark.django_db
def test_a_stored_rule_re2_refuses_is_named_on_upload_and_refused_when_saved(admin_client) -> None:
    client, campaign = admin_client
    Campaign.objects.filter(pk=campaign.pk).update(step_rule=BACKREFERENCE)  # saved before the engine changed
    dashboard = client.get(reverse("manage:dashboard", args=[campaign.slug])).content.decode()
    assert "step rule &#x27;regex:(a)" in dashboard and "Choose another step rule in its settings" in dashboard
    page = client.post(reverse("manage:imports", args=[campaign.slug]),
                       {"kind": "solutions", "file": SimpleUploadedFile("s.jsonl", b"{}\n")})
    assert page.status_code == 400
    assert "campaign&#x27;s step rule" in page.content.decode() or "campaign's step rule" in page.content.decode()
    assert not ImportJob.objects.exists()
    api = client.post(f"/api/campaigns/{campaign.pk}/import-solutions/",
                      {"file": SimpleUploadedFile("s.jsonl", jsonl([{"problem_id": "p1", "solution": "x"}]))})
    assert api.status_code == 400 and "the campaign's step rule 'regex:(a)" in api.json()["split_rule"][0]
    chosen = client.post(reverse("manage:imports", args=[campaign.slug]), {
        "kind": "solutions", "file": SimpleUploadedFile("s.jsonl", b"{}\n"), "split_rule": CATASTROPHIC})
    assert chosen.status_code == 302, chosen.content.decode()[:800]
    assert ImportJob.objects.get().split_rule == CATASTROPHIC  # a regex rule for one import, from the page
    with pytest.raises(CampaignAdminError, match="RE2") as refused:
        update_campaign(campaign=campaign, step_rule=BACKREFERENCE)
    assert refused.value.field == "step_rule"


@pytest.mark.django_db(transaction=True)
def test_an_import_job_under_a_catastrophic_campaign_rule_completes(client, celery_worker_process, campaign_factory,
                                                                    make_user) -> None:
    campaign = campaign_factory("catastrophic", step_rule=CATASTROPHIC)
    Problem.objects.create(campaign=campaign, text="How many a's?", answer="31", source_id="p1")
    client.force_login(make_user("boss", is_staff=True))
    response = client.post(reverse("manage:imports", args=[campaign.slug]), {
        "kind": "solutions", "file": SimpleUploadedFile("s.jsonl", jsonl(
            [{"problem_id": "p1", "solution": VICTIM + "\nand " + VICTIM, "answer": "31"}]))})
    assert response.status_code == 302, response.content.decode()[:800]
    job_id = ImportJob.objects.latest("id").pk
    job = wait_for(lambda: (found := ImportJob.objects.get(pk=job_id)).is_finished and found, timeout=60,
                   every=0.2, what="the import under a catastrophic step rule to finish (a backtracking engine hangs)")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert Solution.objects.get(campaign=campaign).steps.count() == 1


@pytest.mark.django_db
def test_a_stored_grader_pattern_re2_refuses_keeps_the_labeling_page_and_is_named(admin_client, member) -> None:
    client, campaign = admin_client
    Campaign.objects.filter(pk=campaign.pk).update(grader="regex", grader_config={"pattern": "(?<=Answer: ).*"})
    labeler = member(campaign, "lab")
    SolutionFactory(campaign=campaign, problem=Problem.objects.get(campaign=campaign), steps=["Answer: 31"])
    labeling = Client()
    labeling.force_login(labeler)
    workspace = labeling.post(reverse("annotate:start", args=[campaign.slug]), follow=True)
    assert workspace.status_code == 200 and "Answer: 31" in workspace.content.decode()
    dashboard = client.get(reverse("manage:dashboard", args=[campaign.slug])).content.decode()
    assert "grader setting pattern:" in dashboard and "RE2" in dashboard
    api = client.post(f"/api/campaigns/{campaign.pk}/import-solutions/",
                      {"file": SimpleUploadedFile("s.jsonl", jsonl([{"problem_id": "p1", "solution": "x"}]))})
    assert api.status_code == 400 and "RE2" in api.json()["grader"][0]

"""Job pages a user can read: the failure in one sentence, the traceback only for staff behind "details",
no terminal colours or library banners in the log, samples done / total, cancel on every running job."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from rewards.jobs.text import clean_log, failure_summary
from tests.factories import PASSWORD, SamplingJobFactory, TrainingJobFactory

pytestmark = pytest.mark.django_db

TRAINER_FAILURE = """the process exited with status 1
--- stderr (tail) ---
Traceback (most recent call last):
  File "/app/rewards/training/__main__.py", line 40, in main
    metrics = run_training(config)
ValueError: /var/jobs/datasets/outcome.jsonl: no training rows (check the 'split' column or eval_fraction)
error: /var/jobs/datasets/outcome.jsonl: no training rows (check the 'split' column or eval_fraction)"""

LOAD_REPORT_LOG = """\x1b[1mBertForTokenClassification LOAD REPORT\x1b[0m from: /models/minilm
Key                | Status  |  | 
-------------------+---------+--+-
classifier.weight  | \x1b[31mMISSING\x1b[0m |  | 
classifier.bias    | \x1b[31mMISSING\x1b[0m |  | 

Notes:
- \x1b[31mMISSING:\x1b[0m\tthose params were newly initialized
{'loss': 0.69, 'step': 1}
\x1b[32mtrained prm in 12.0s\x1b[0m -> /var/jobs/output"""


def test_failure_summary_is_the_processes_own_error_line() -> None:
    assert failure_summary(TRAINER_FAILURE) == ("/var/jobs/datasets/outcome.jsonl: no training rows (check the "
                                                "'split' column or eval_fraction) (the process exited with status 1)")
    assert failure_summary("worker lost: no heartbeat since 03:00 UTC (timeout 300 s)") == \
        "worker lost: no heartbeat since 03:00 UTC (timeout 300 s)"
    python_only = "the process exited with status 1\n--- stderr (tail) ---\nTraceback …\nKeyError: 'ratings'"
    assert failure_summary(python_only) == "'ratings' (the process exited with status 1)"
    assert failure_summary("") == ""


def test_clean_log_drops_ansi_codes_and_the_load_report() -> None:
    cleaned = clean_log(LOAD_REPORT_LOG)
    assert "\x1b" not in cleaned and "MISSING" not in cleaned and "Notes:" not in cleaned
    assert cleaned.splitlines() == ["(model loading report hidden)", "{'loss': 0.69, 'step': 1}",
                                    "trained prm in 12.0s -> /var/jobs/output"]


@pytest.fixture
def failed_job(loop_campaign):
    return TrainingJobFactory(kind="orm", campaign=loop_campaign, dataset_path="/x.jsonl", status="failed",
                              error=TRAINER_FAILURE, log_tail=LOAD_REPORT_LOG, started_at=timezone.now(),
                              finished_at=timezone.now())


def test_job_page_failure_for_a_campaign_admin(client, campaign_admin, failed_job) -> None:
    assert client.login(username=campaign_admin.username, password=PASSWORD)
    page = client.get(reverse("jobs:job", args=[failed_job.pk])).content.decode()
    assert '<p class="error" data-job-error>/var/jobs/datasets/outcome.jsonl: no training rows' in page
    assert "Traceback" not in page and "data-error-details" not in page  # the traceback is for staff
    assert "\x1b" not in page and "LOAD REPORT" not in page and "(model loading report hidden)" in page


def test_job_page_failure_details_for_staff(client, make_user, failed_job) -> None:
    staff = make_user("staff-loop", is_staff=True)
    assert client.login(username=staff.username, password=PASSWORD)
    page = client.get(reverse("jobs:job", args=[failed_job.pk])).content.decode()
    assert page.count("Traceback (most recent call last)") == 1  # once, behind the toggle
    details = page[page.index("data-error-details"):]
    assert details.index("<summary>") < details.index("Traceback")


def test_sampling_job_page_shows_samples_done_and_cancel(client, campaign_admin, loop_campaign) -> None:
    job = SamplingJobFactory(campaign=loop_campaign, status="running", started_at=timezone.now(),
                             heartbeat_at=timezone.now(), problem_count=5, config={"n": 4}, progress=0.35,
                             summary={"samples_done": 7, "samples_total": 20})
    assert client.login(username=campaign_admin.username, password=PASSWORD)
    page = client.get(reverse("jobs:sampling_job", args=[job.pk])).content.decode()
    assert "7 / 20 samples" in page and "data-cancel" in page
    dashboard = client.get(reverse("jobs:campaign_dashboard", args=[loop_campaign.slug])).content.decode()
    assert "7 / 20 samples" in dashboard
    client.post(reverse("jobs:sampling_job_cancel", args=[job.pk]))
    job.refresh_from_db()
    assert job.cancel_requested


def test_sampling_progress_counts_the_partial_file(loop_campaign, tmp_path) -> None:
    from rewards.jobs.services.sampling import SAMPLES, _progress

    job = SamplingJobFactory(campaign=loop_campaign, problem_count=3, config={"n": 4}, work_dir=str(tmp_path))
    (tmp_path / (SAMPLES + ".partial")).write_text("{}\n" * 5)
    assert _progress(job) == {"progress": 5 / 12, "summary": {"samples_done": 5, "samples_total": 12}}

"""A real Celery worker whose pool process is SIGKILLed in the middle of a browser import: nothing of the
import is visible, the job does not stay "running", and Celery's redelivery (acks_late + reject_on_worker_lost)
imports the file exactly once."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from annotate.models import Assignment, ImportJob, ImportKind, Rating, Solution
from steplab.jobs import JobStatus
from tests.conftest import kill_pool_process
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
COPIES = 6  # the 900 phase-1 rows six times over: an import that runs for seconds, long enough to be killed


def test_sigkill_mid_import_commits_nothing_and_the_redelivery_imports_once(
        shared_data: Path, campaign_factory, killable_worker, settings, tmp_path: Path) -> None:
    from annotate.tasks import run_import_job_task

    settings.MEDIA_ROOT = str(tmp_path / "media")
    process, queue, log = killable_worker("import-kill", MEDIA_ROOT=settings.MEDIA_ROOT)
    campaign = campaign_factory("kill", mode="conversational")
    rows = (shared_data / "prm800k" / "phase1_train_reconstructed.jsonl").read_bytes()
    job = ImportJob(campaign=campaign, kind=ImportKind.PRM800K, original_name="phase1x6.jsonl", skip_invalid=True)
    job.file.save("phase1x6.jsonl", ContentFile(rows * COPIES), save=True)

    run_import_job_task.apply_async(args=[job.pk], queue=queue)
    def writing() -> bool:
        current = ImportJob.objects.get(pk=job.pk)
        assert current.status != JobStatus.SUCCEEDED, "the import finished before it could be killed"
        return current.phase == "import" and current.progress > 0.6  # rows are being written in its transaction

    wait_for(writing, timeout=120, every=0.01, what=lambda: f"the import's write phase: {log.read_text()[-3000:]}")
    kill_pool_process(process)
    assert not Solution.objects.filter(campaign=campaign).exists(), "killed mid-import: nothing may be visible"

    wait_for(lambda: ImportJob.objects.get(pk=job.pk).is_finished, timeout=180, every=0.2,
             what=lambda: f"the redelivered import: {log.read_text()[-3000:]}")
    job.refresh_from_db()
    assert "WorkerLostError" in log.read_text() or "signal 9" in log.read_text()
    assert job.status == JobStatus.SUCCEEDED, f"job {job.status}: {job.error} {log.read_text()[-3000:]}"
    per_copy = job.imported // COPIES
    assert job.imported == per_copy * COPIES > 800 * COPIES
    assert Solution.objects.filter(campaign=campaign).count() == job.imported, "imported exactly once"
    assert Assignment.objects.filter(solution__campaign=campaign).count() == job.imported
    assert Rating.objects.filter(assignment__solution__campaign=campaign).exists()

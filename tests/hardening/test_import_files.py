"""Uploaded import files do not outlive their job: deleted when the job ends (imported or failed), never kept
when refused for size, and what is left over is swept by a periodic task."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.models import ImportJob, ImportKind
from annotate.services.campaigns import sweep_import_files
from steplab.jobs import JobStatus
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
DEEP = 50_000


@pytest.fixture
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


def _job(campaign, content: bytes, **extra) -> ImportJob:
    job = ImportJob(campaign=campaign, kind=ImportKind.PROBLEMS, original_name="p.jsonl", **extra)
    job.file.save("p.jsonl", ContentFile(content), save=True)
    return job


def _files(media: Path) -> list[Path]:
    return sorted(path for path in (media / "imports").rglob("*") if path.is_file()) if media.exists() else []


def _upload(client, slug: str, content: bytes) -> ImportJob:
    response = client.post(reverse("manage:imports", args=[slug]),
                           {"kind": "problems", "file": SimpleUploadedFile("p.jsonl", content)})
    assert response.status_code == 302, response.content.decode()[:500]
    return ImportJob.objects.latest("id")


def _wait(job: ImportJob, timeout: float = 60) -> ImportJob:
    """Until the job has finished and its upload is gone."""
    return wait_for(lambda: job.refresh_from_db() or (job.is_finished and not job.file.name and job),
                    timeout=timeout, every=0.2, what=f"import job {job.pk} to finish and delete its upload")


def test_the_upload_is_deleted_when_the_job_succeeds_or_fails(celery_worker_process, campaign_factory, client,
                                                              make_user, settings) -> None:
    """Through the browser upload and the real worker (which stores uploads in the default MEDIA_ROOT)."""
    campaign = campaign_factory("files")
    client.force_login(make_user("boss", is_staff=True))
    good = _upload(client, campaign.slug, b'{"problem": "What is $1+1$?", "answer": "2"}\n')
    bad = _upload(client, campaign.slug, b'{"problem": "Fine"}\n' + b"[" * DEEP + b"]" * DEEP + b"\n{\n")
    stored = [Path(settings.MEDIA_ROOT) / job.file.name for job in (good, bad)]
    assert all(path.is_file() for path in stored)
    assert [_wait(good).status, _wait(bad).status] == [JobStatus.SUCCEEDED, JobStatus.FAILED]
    assert not any(path.exists() for path in stored), "no upload outlives its job"
    # The failed job's report keeps its line-numbered errors: the nested line is named, not a RecursionError.
    assert [(row["line"], row["message"]) for row in bad.rejected] == [
        (2, "not usable JSON (JSON nested more than 64 levels deep)"),
        (3, "not valid JSON (Expecting property name enclosed in double quotes: line 2 column 1 (char 2))")]
    html = client.get(reverse("manage:import", args=[campaign.slug, bad.pk])).content.decode()
    assert 'data-rejected-line="2"' in html and "nested more than 64 levels" in html and "RecursionError" not in html


def test_an_oversized_upload_keeps_nothing(media: Path, campaign_factory, client, make_user, settings) -> None:
    settings.STEPLAB_UPLOAD_MAX_BYTES = 100
    campaign_factory("big")
    client.force_login(make_user("boss", is_staff=True))
    response = client.post(reverse("manage:imports", args=["big"]),
                           {"kind": "problems", "file": SimpleUploadedFile("big.jsonl", b"{}\n" * 100)})
    assert response.status_code == 400 and "larger than 100 bytes" in response.content.decode()
    assert not ImportJob.objects.exists() and _files(media) == []


def test_the_sweep_deletes_leftovers_and_keeps_live_uploads(media: Path, campaign_factory) -> None:
    campaign = campaign_factory("sweep")
    queued = _job(campaign, b"{}\n")  # waiting for a worker: kept
    finished = _job(campaign, b"{}\n")  # its worker was lost between the commit and the deletion
    ImportJob.objects.filter(pk=finished.pk).update(status=JobStatus.FAILED)
    orphan_old, orphan_new = media / "imports" / "2020" / "01" / "old.jsonl", media / "imports" / "new.jsonl"
    for orphan in (orphan_old, orphan_new):
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"{}\n")
    day_ago = time.time() - 86_400
    os.utime(orphan_old, (day_ago, day_ago))
    assert sweep_import_files() == 2
    assert _files(media) == sorted([orphan_new, media / queued.file.name])
    assert ImportJob.objects.get(pk=finished.pk).file.name == ""
    assert sweep_import_files() == 0


def test_the_sweep_is_in_the_beat_schedule(settings) -> None:
    from steplab.celery import app

    tasks = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks["annotate.sweep_import_files"] <= 24 * 3600
    import annotate.tasks  # noqa: F401  (registers the tasks)

    assert "annotate.sweep_import_files" in app.tasks

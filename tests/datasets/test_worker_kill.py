"""A real Celery worker whose pool process is SIGKILLed mid-export leaves no visible version; Celery
redelivers the task (acks_late + reject_on_worker_lost) and the retried export has the same hashes."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from annotate.services.prm800k_import import import_prm800k
from rewards.exports import export_campaign
from rewards.models import DatasetVersion
from tests.conftest import kill_pool_process
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def export_worker(killable_worker, storage_dirs: dict[str, Path]):
    """Our own worker (it gets killed), sharing the test's media and temp folders."""
    return killable_worker("export-kill", MEDIA_ROOT=str(storage_dirs["media"]),
                           STEPLAB_EXPORT_TMP_DIR=str(storage_dirs["tmp"]))


def test_sigkill_mid_export_leaves_no_version_and_the_retry_has_the_same_hashes(
        shared_data, campaign_factory, storage_dirs, export_worker, tmp_path) -> None:
    from rewards.tasks import snapshot_dataset_task

    process, queue, log = export_worker
    campaign = campaign_factory("big", name="PRM800K phase-1 train", mode="conversational")
    report = import_prm800k(shared_data / "prm800k" / "phase1_train_reconstructed.jsonl", campaign,
                            skip_invalid=True)  # 49 rows have the non-PRM800K reason give_up_or_unknown

    snapshot_dataset_task.apply_async(args=[campaign.pk], queue=queue)
    wait_for(lambda: [p for p in storage_dirs["tmp"].glob("export-*/.*.partial") if p.stat().st_size > 0],
             timeout=60, every=0.005, what=lambda: f"the export to start: {log.read_text()[-3000:]}")
    kill_pool_process(process)
    assert not DatasetVersion.objects.exists(), "killed mid-export: nothing may be visible yet"

    version = wait_for(lambda: DatasetVersion.objects.filter(campaign=campaign).first(), timeout=180, every=0.2,
                       what=lambda: f"the redelivered task to finish: {log.read_text()[-3000:]}")
    assert "WorkerLostError" in log.read_text() or "signal 9" in log.read_text()
    assert DatasetVersion.objects.count() == 1 and version.status == DatasetVersion.Status.READY
    for fmt, info in version.files.items():
        data = (storage_dirs["media"] / version.file_name(fmt)).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"], fmt
    assert not list((storage_dirs["media"] / version.folder).glob(".*")), "no partial file in the version folder"
    # The retried export equals an independent export of the same labels, byte for byte.
    for fmt, exporter, suffix in (("prm800k", "prm800k", ".jsonl"), ("trl-stepwise", "trl-stepwise", ".jsonl"),
                                  ("trl-stepwise-parquet", "trl-stepwise", ".parquet"),
                                  ("outcome", "outcome", ".jsonl")):
        reference = export_campaign(campaign, exporter, tmp_path / f"ref-{fmt}{suffix}")
        assert reference.sha256 == version.files[fmt]["sha256"], fmt
    assert version.counts["rows"]["prm800k"] == report.imported > 800

"""A real Celery worker whose pool process is SIGKILLed while its training subprocess runs: the trainer stops
with its watcher (before any reaper could reach it), the job stays "running" only until the reaper sees the
heartbeats stop, then fails (or is requeued while attempts remain), and no model is registered."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from annotate.permissions import SYSTEM
from tests.conftest import FAST_HYPER, kill_pool_process

pytestmark = [pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]
LONG_HYPER = {**FAST_HYPER, "max_steps": 5000}  # minutes of CPU training: it is killed long before the end
HEARTBEAT_TIMEOUT_S = 2


def process_group(pgid: int) -> dict[int, str]:
    """Live (non-zombie) processes of a process group: pid → command line."""
    members = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members[int(stat.parent.name)] = command
    return members


@pytest.fixture
def training_worker(killable_worker, settings, tmp_path: Path):
    """Our own worker (it gets killed), polling its job often; the reaper runs here with a short timeout."""
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    settings.STEPLAB_JOB_HEARTBEAT_TIMEOUT_S = HEARTBEAT_TIMEOUT_S
    return killable_worker("train-kill", STEPLAB_JOB_POLL_INTERVAL_S="0.3")


def kill_mid_training(dataset_version: Any, worker: tuple[Any, str, Path], wait_for: Any) -> tuple[Any, int, int]:
    """Start a long PRM job on the worker, SIGKILL its pool process once the trainer reports a step, and wait
    for the trainer's whole process group to be gone. Returns (job, process group, trainer pid)."""
    from rewards.jobs.kinds import registry
    from rewards.jobs.models import JobStatus, TrainingJob
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    process, queue, log = worker
    with transaction.atomic():  # recorded as sent: its task goes to our own worker, not to the gpu queue
        job = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper=LONG_HYPER),
            user=SYSTEM)
        TrainingJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now())
    registry.get("training").task.apply_async(args=[job.pk], queue=queue)
    wait_for(lambda: job.refresh_from_db() or (job.status == JobStatus.RUNNING and job.step >= 1), timeout=120,
             every=0.2, what=f"training to report a step: {log.read_text()[-3000:]}")
    group = int(job.external_id)
    trainers = [pid for pid, command in process_group(group).items() if "rewards.training train" in command]
    assert len(trainers) == 1, process_group(group)

    kill_pool_process(process)
    wait_for(lambda: not process_group(group), timeout=30, every=0.1,
             what="the trainer to stop with its killed watcher")
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING, "nobody is left to report on it but the reaper"
    # Celery redelivers the task (acks_late + reject_on_worker_lost); the new pool process finds it claimed.
    wait_for(lambda: log.read_text().count("succeeded in") == 1, timeout=60, what="the redelivered task")
    assert "WorkerLostError" in log.read_text() or "signal 9" in log.read_text()
    return job, group, trainers[0]


def reap_once_stale(job: Any, wait_for: Any) -> dict[str, list[int]]:
    """Run the periodic reaper once the job's last heartbeat is older than the timeout."""
    from rewards.jobs.tasks import reap_stale_jobs

    stale = job.heartbeat_at + timedelta(seconds=HEARTBEAT_TIMEOUT_S + 0.5)
    wait_for(lambda: timezone.now() > stale, timeout=10, every=0.1, what="the heartbeat to go stale")
    return reap_stale_jobs()


def test_sigkill_of_the_worker_mid_training_fails_the_job_and_stops_the_trainer(
        dataset_version, training_worker, wait_for) -> None:
    from rewards.jobs.models import JobStatus, RewardModel

    job, group, trainer = kill_mid_training(dataset_version, training_worker, wait_for)
    assert reap_once_stale(job, wait_for)["training"] == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.finished_at is not None
    assert job.error.startswith("worker lost: no heartbeat since") and f"(timeout {HEARTBEAT_TIMEOUT_S} s)" in job.error
    assert 1 <= job.step < LONG_HYPER["max_steps"] and job.attempts == 1
    assert not RewardModel.objects.filter(job=job).exists()
    assert not (Path(job.output_dir) / "steplab_reward_model.json").exists(), "no model was saved"
    assert not Path(f"/proc/{trainer}").exists() and not process_group(group)


def test_sigkill_of_the_worker_requeues_the_job_while_attempts_remain(
        dataset_version, training_worker, celery_worker_process, wait_for, settings) -> None:
    from rewards.jobs.models import JobStatus, RewardModel
    from rewards.jobs.services.training import request_cancel

    settings.STEPLAB_JOB_MAX_ATTEMPTS = 2
    job, group, _ = kill_mid_training(dataset_version, training_worker, wait_for)
    first_task = job.celery_task_id
    assert reap_once_stale(job, wait_for)["training"] == [job.pk]
    job.refresh_from_db()
    assert job.status in (JobStatus.QUEUED, JobStatus.RUNNING) and job.finished_at is None
    assert job.error.startswith("worker lost (no heartbeat since") and job.error.endswith("; retrying")
    assert job.celery_task_id and job.celery_task_id != first_task, "a new task was sent"

    # The healthy worker of the gpu queue runs the second attempt in a fresh process; cancel it there.
    wait_for(lambda: job.refresh_from_db() or (job.status == JobStatus.RUNNING and job.attempts == 2
                                               and job.external_id and job.step >= 1),
             timeout=120, every=0.2, what="the second attempt to train")
    second = int(job.external_id)
    assert second != group and process_group(second) and not process_group(group)
    assert request_cancel(job) == JobStatus.RUNNING
    wait_for(lambda: job.refresh_from_db() or job.status == JobStatus.CANCELLED, timeout=60,
             what="the second attempt to be cancelled")
    wait_for(lambda: not process_group(second), timeout=30, what="the second trainer to stop")
    assert not RewardModel.objects.filter(job=job).exists()

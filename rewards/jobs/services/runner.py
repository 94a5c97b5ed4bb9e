"""The watch loop of launched jobs (the kinds of ``rewards.jobs.kinds`` that declare ``hooks``): claim, submit,
poll with heartbeats, finish once, and the reaper of jobs whose watcher stopped sending heartbeats.

Every status change goes through ``steplab.jobs`` (conditional UPDATEs on the current status), so a watcher,
the reaper and a cancel can race without a job ending twice: whoever moves it out of ``running`` first wins,
and a watcher that finds its job already finished (reaped, say) stops the process and returns.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from steplab import jobs

from ..backends import STDERR_FILE, STDOUT_FILE, BackendError, Launch, Launcher, PollResult, get_backend, tail
from ..kinds.registry import kinds
from ..models import JobStatus, LaunchedJob

log = logging.getLogger(__name__)
J = TypeVar("J", bound=LaunchedJob)
ERROR_TAIL_BYTES = 6000
LOG_TAIL_BYTES = 8000


@dataclass
class JobHooks:
    """What differs between job types: the launch, progress read from the job's files, success handling."""

    launch: Launch
    progress: Callable[[], dict[str, Any]]
    on_success: Callable[[], object]  # what it returns is not used


def heartbeat_timeout() -> timedelta:
    return timedelta(seconds=settings.STEPLAB_JOB_HEARTBEAT_TIMEOUT_S)


def poll_interval() -> float:
    return float(settings.STEPLAB_JOB_POLL_INTERVAL_S)


def claim(model: type[J], job_id: int, *, related: Sequence[str] = ()) -> J | None:
    """queued → running for exactly one watcher, counting the attempt and starting the heartbeats; the job with
    its ``related`` rows, or None when it is gone, cancelled or already claimed."""
    return jobs.claim(model, job_id, where={"cancel_requested": False}, related=related,
                      heartbeat_at=timezone.now(), attempts=F("attempts") + 1)


def finish(job: LaunchedJob, status: str, *, error: str = "", **fields: Any) -> bool:
    """running (or queued) → a final status, once (a success shows full progress); whether this call did it."""
    if status == JobStatus.SUCCEEDED:
        fields["progress"] = 1.0
    return jobs.finish(job, status, error=error, **fields)


def dispatch_undispatched(*, older_than: timedelta = timedelta(seconds=30)) -> dict[str, list[int]]:
    """Queued launched jobs whose task never reached the broker (it was down when they were started): send them
    now (every launched kind of the registry). Ids sent, by model name."""
    sent = {kind.model.__name__: jobs.dispatch_pending(kind.model, older_than=older_than)
            for kind in kinds() if kind.launched}
    return {name: ids for name, ids in sent.items() if ids}


def process_logs(launch: Launch) -> str:
    out = tail(launch.work_dir / STDOUT_FILE, LOG_TAIL_BYTES // 2)
    err = tail(launch.work_dir / STDERR_FILE, LOG_TAIL_BYTES)
    return (out + ("\n" if out and err else "") + err)[-LOG_TAIL_BYTES:]


def failure_message(launch: Launch, reason: str) -> str:
    """The reason, then the process's stderr tail (where the trainer prints its traceback and ``error:`` line)."""
    stderr = tail(launch.work_dir / STDERR_FILE, ERROR_TAIL_BYTES).strip()
    return f"{reason}\n--- stderr (tail) ---\n{stderr}" if stderr else reason


def watch(job: Any, hooks: JobHooks, backend: Launcher | None = None, *, interval: float | None = None) -> str:
    """Run a claimed job to its end; returns the final status."""
    backend = backend or get_backend(job.backend)
    interval = poll_interval() if interval is None else interval
    model = type(job)
    try:
        external_id = backend.submit(hooks.launch)
    except (BackendError, OSError) as exc:
        finish(job, JobStatus.FAILED, error=f"could not submit to {backend.name}: {exc}")
        return job.status
    model.objects.filter(pk=job.pk).update(external_id=external_id)
    job.external_id = external_id
    while True:
        try:
            result = backend.poll(hooks.launch, external_id)
        except BackendError as exc:  # a flaky scheduler command: keep the heartbeat, try again
            log.warning("poll of %s failed: %s", job, exc)
            result = None
        updates = {"heartbeat_at": timezone.now(), "log_tail": process_logs(hooks.launch), **hooks.progress()}
        if not model.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(**updates):
            backend.cancel(hooks.launch, external_id)  # reaped or finished elsewhere: stop the process
            job.refresh_from_db()
            return job.status
        for key, value in updates.items():
            setattr(job, key, value)
        if result is not None and result.finished:
            break
        if model.objects.filter(pk=job.pk, cancel_requested=True).exists():
            backend.cancel(hooks.launch, external_id)
            finish(job, JobStatus.CANCELLED, error="cancelled on request")
            return job.status
        time.sleep(interval)
    return conclude(job, hooks, result)


def conclude(job: Any, hooks: JobHooks, result: PollResult) -> str:
    """Finish a job the backend reports as ended: outputs registered on success, else the reason kept."""
    if result.state == "succeeded":
        try:
            with transaction.atomic():
                hooks.on_success()
                finish(job, JobStatus.SUCCEEDED)
        except Exception as exc:  # noqa: BLE001 - any problem with the outputs fails the job, with the reason
            log.exception("finishing %s failed", job)
            finish(job, JobStatus.FAILED, error=f"the run exited 0 but its outputs could not be used: "
                                                 f"{type(exc).__name__}: {exc}")
    elif result.state == "cancelled":
        finish(job, JobStatus.CANCELLED, error=result.reason or "cancelled by the scheduler")
    else:
        reason = (f"the process exited with status {result.exit_code}" if result.exit_code is not None
                  else result.reason or f"the job ended in state {result.state}")
        finish(job, JobStatus.FAILED, error=failure_message(hooks.launch, reason))
    return job.status


def reap(model: type[Any], hooks_for: Callable[[Any], JobHooks], *, now: Any = None) -> list[int]:
    """Fail (or requeue, while attempts remain) running jobs whose watcher stopped sending heartbeats."""
    now = now or timezone.now()
    cutoff = now - heartbeat_timeout()
    max_attempts = settings.STEPLAB_JOB_MAX_ATTEMPTS
    reaped: list[int] = []
    for job in model.objects.filter(status=JobStatus.RUNNING, heartbeat_at__lt=cutoff):
        last = job.heartbeat_at
        if job.external_id:
            try:
                hooks = hooks_for(job)
                backend = get_backend(job.backend)
                if backend.outlives_watcher:  # a scheduler still knows how the job ended: keep its word
                    result = backend.poll(hooks.launch, job.external_id)
                    if result.finished:
                        if conclude(job, hooks, result) != JobStatus.RUNNING:
                            reaped.append(job.pk)
                        continue
                backend.cancel(hooks.launch, job.external_id)
            except Exception as exc:  # noqa: BLE001 - best effort: the worker (and its process) may be gone
                log.info("could not stop %s while reaping: %s", job, exc)
        if job.attempts < max_attempts and not job.cancel_requested:
            requeued = model.objects.filter(pk=job.pk, status=JobStatus.RUNNING, heartbeat_at=last).update(
                status=JobStatus.QUEUED, external_id="", heartbeat_at=None, dispatched_at=None,
                error=f"worker lost (no heartbeat since {last:%Y-%m-%d %H:%M:%S} UTC); retrying")
            if requeued:
                reaped.append(job.pk)
                job.refresh_from_db()
                jobs.dispatch(job)
            continue
        if job.cancel_requested:
            done = finish(job, JobStatus.CANCELLED, error="cancelled; its worker stopped answering")
        else:
            done = finish(job, JobStatus.FAILED, error=(
                f"worker lost: no heartbeat since {last:%Y-%m-%d %H:%M:%S} UTC "
                f"(timeout {int(heartbeat_timeout().total_seconds())} s)"))
        if done:
            reaped.append(job.pk)
    return reaped

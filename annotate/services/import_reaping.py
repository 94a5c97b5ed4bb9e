"""Import jobs whose task died: failed with the reason, so none stays "running".

An import's work is one transaction that also holds the job's advisory lock (``campaigns._claim_job``), so on
PostgreSQL a running job whose lock nobody holds has no live execution. Its task died (the worker was killed, or
the task ended without recording its end); Celery may still redeliver it, so only jobs started longer ago than
the job heartbeat timeout are reaped. SQLite has no such lock: there a job running longer than the task time limit
(after which Celery kills any task) is reaped.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from steplab import jobs
from steplab.jobs import JobStatus

from ..models import ImportJob
from .campaigns import IMPORT_JOB_LOCK_CLASS


def _no_live_execution(job_id: int) -> bool:
    """Takes the job's lock for the caller's transaction when no execution holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [IMPORT_JOB_LOCK_CLASS, job_id])
        return bool(cursor.fetchone()[0])


def reap_dead_imports(*, now: datetime | None = None) -> list[int]:
    """Fail the running import jobs no task is working on; the ids failed."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.STEPLAB_JOB_HEARTBEAT_TIMEOUT_S)
    postgres = connection.vendor == "postgresql"
    cutoff = now - grace if postgres else now - grace - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    reaped: list[int] = []
    for job in ImportJob.objects.filter(status=JobStatus.RUNNING, started_at__lt=cutoff):
        # the lock is held until the failure commits: a redelivered task then finds the job finished
        with transaction.atomic():
            if postgres and not _no_live_execution(job.pk):
                continue
            started = f"{job.started_at:%Y-%m-%d %H:%M:%S} UTC" if job.started_at else "an unknown time"
            if jobs.finish(job, JobStatus.FAILED, error=(
                    f"the import's task died (running since {started}, and no worker is importing it); nothing "
                    f"was imported: upload {job.original_name} again")):
                reaped.append(job.pk)
    return reaped

"""The periodic reaper fails import jobs whose task died, with the reason, so none stays "running"; a job a live
execution holds (its advisory lock) is left alone."""
from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from annotate.models import ImportJob, ImportKind
from annotate.services.campaigns import IMPORT_JOB_LOCK_CLASS
from rewards.jobs.tasks import reap_stale_jobs
from steplab.jobs import JobStatus
from tests.factories import ImportJobFactory

pytestmark = pytest.mark.django_db(transaction=True)  # the other connection must see the jobs


def _running(campaign, *, minutes_ago: int) -> ImportJob:
    return ImportJobFactory(campaign=campaign, kind=ImportKind.SOLUTIONS, original_name="lost.jsonl",
                            status=JobStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=minutes_ago))


def test_reaper_fails_a_dead_import_and_spares_a_live_or_young_one(campaign_factory) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the live-execution lock is PostgreSQL's (SQLite reaps after the task time limit)")
    campaign = campaign_factory("reap")
    dead, live, young = _running(campaign, minutes_ago=60), _running(campaign, minutes_ago=60), \
        _running(campaign, minutes_ago=0)
    params = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"}, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [IMPORT_JOB_LOCK_CLASS, live.pk])  # its worker is alive
        reaped = reap_stale_jobs()["imports"]
    assert reaped == [dead.pk]
    dead.refresh_from_db()
    assert dead.status == JobStatus.FAILED and dead.finished_at is not None
    assert "task died" in dead.error and "lost.jsonl" in dead.error
    assert ImportJob.objects.get(pk=live.pk).status == JobStatus.RUNNING
    assert ImportJob.objects.get(pk=young.pk).status == JobStatus.RUNNING  # Celery may still redeliver it
    assert reap_stale_jobs()["imports"] == [live.pk]  # its worker's connection is gone: now it is dead too
    assert reap_stale_jobs()["imports"] == []


@pytest.mark.both_databases  # on SQLite, the only way a dead import is found
def test_a_job_running_past_the_task_time_limit_is_reaped_on_either_database(campaign_factory, settings) -> None:
    settings.CELERY_TASK_TIME_LIMIT = 60
    settings.STEPLAB_JOB_HEARTBEAT_TIMEOUT_S = 60
    campaign = campaign_factory("reap-limit")
    job = _running(campaign, minutes_ago=10)
    assert job.pk in reap_stale_jobs()["imports"]
    assert ImportJob.objects.get(pk=job.pk).status == JobStatus.FAILED

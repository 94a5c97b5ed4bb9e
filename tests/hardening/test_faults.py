"""Fault injection on the real services: PostgreSQL restarted and Redis stopped while labelers work.

These tests stop and start the machine's own PostgreSQL and Redis (as `./run test` would start them), so they
are marked `faults` and run last (tests/conftest.py orders them); they need root and `pg_ctlcluster`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from annotate.models import Assignment, Rating, Role
from tests.factories import MembershipFactory, SolutionFactory, TrainingJobFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

REDIS_START = ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
               "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log"]


def _need_root_and(tool: str) -> None:
    if os.geteuid() != 0 or shutil.which(tool) is None:
        pytest.skip(f"needs root and {tool} to control the local service")


def _wait(check, seconds: float = 30) -> None:
    wait_for(check, timeout=seconds, every=0.3, what="the service to come back")


def _pg(action: str) -> None:
    version = sorted(os.listdir("/etc/postgresql"))[0]
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action], check=True,
                   capture_output=True)


def _pg_ready() -> bool:
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).returncode == 0


def _labeling_setup(campaign_factory, make_user, steps: int = 3):
    campaign = campaign_factory("faults")
    SolutionFactory(campaign=campaign, problem__text="What is $1+1$?", problem__answer="2",
                    steps=[f"step {index}" for index in range(steps)])
    user = make_user("lab", password="pw-Steplab-1")
    MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    return campaign, user


def test_postgres_restart_fails_cleanly_then_recovers(client, campaign_factory, make_user) -> None:
    _need_root_and("pg_ctlcluster")
    from annotate.services.labeling import record_rating
    from annotate.services.leases import lease_next_solution

    campaign, user = _labeling_setup(campaign_factory, make_user)
    assignment = lease_next_solution(campaign, user).assignment
    record_rating(assignment.pk, user=user, step_index=0, rating=1)
    client.force_login(user)
    client.raise_request_exception = False
    rate = (f"/assignments/{assignment.pk}/rate", {"step_index": 1, "rating": 1})
    try:
        _pg("stop")
        down = client.get("/healthz")
        # A clean "try again" (the workspace re-sends a rating on 503), not a hang, a 500 or a half-written row.
        assert down.status_code == 503 and down["Retry-After"] == "2"
        lost = client.post(*rate, HTTP_HX_REQUEST="true")
        assert lost.status_code == 503 and b"nothing from this request was saved" in lost.content
    finally:
        _pg("start")
        _wait(_pg_ready)
        connection.close()  # this test process's connection died with the server
    _wait(lambda: client.get("/healthz").status_code == 200)
    assert client.post(*rate, HTTP_HX_REQUEST="true").status_code == 200  # the client's retry, once it is back
    ratings = dict(Rating.objects.filter(assignment=assignment).values_list("completion__step__index", "rating"))
    assert ratings == {0: 1, 1: 1}
    assert Assignment.objects.filter(solution__campaign=campaign).count() == 1


def _redis_up() -> bool:
    return subprocess.run(["redis-cli", "-p", "6379", "ping"], capture_output=True).returncode == 0


def test_labeling_keeps_working_while_redis_is_down(client, campaign_factory, make_user) -> None:
    _need_root_and("redis-server")
    from annotate.services.labeling import record_rating
    from annotate.services.leases import lease_next_solution

    campaign, user = _labeling_setup(campaign_factory, make_user)
    try:
        subprocess.run(["redis-cli", "-p", "6379", "shutdown", "nosave"], capture_output=True)
        _wait(lambda: not _redis_up())
        # Login (its rate limiter fails open without the cache), the home page and the services still work.
        response = client.post("/accounts/login/", {"username": "lab", "password": "pw-Steplab-1"})
        assert response.status_code == 302
        assert client.get("/").status_code == 200
        assignment = lease_next_solution(campaign, user).assignment
        for index in range(3):
            record_rating(assignment.pk, user=user, step_index=index, rating=1)
        assert Rating.objects.filter(assignment=assignment).count() == 3
    finally:
        Path("/var/lib/redis").mkdir(parents=True, exist_ok=True)
        Path("/var/log/redis").mkdir(parents=True, exist_ok=True)
        if not _redis_up():
            subprocess.run(REDIS_START, check=True)
        _wait(_redis_up)


def test_work_started_while_redis_is_down_is_sent_when_it_returns(client, celery_worker_process, campaign_factory,
                                                                   make_user, shared_data, settings, tmp_path) -> None:
    """An upload and a training job started during a Redis outage: the request succeeds, the job stays queued
    in the database, and the dispatchers send it once Redis is back; the worker then runs the import."""
    _need_root_and("redis-server")
    from datetime import timedelta

    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotate.models import ImportJob
    from annotate.services.campaigns import dispatch_pending_imports
    from rewards.jobs.services.runner import dispatch_undispatched
    from steplab import jobs

    campaign_factory("outage")
    client.force_login(make_user("boss", is_staff=True))
    rows = b"".join(line for _, line in zip(range(5), (shared_data / "math" / "math500.jsonl").open("rb"),
                                            strict=False))
    try:
        subprocess.run(["redis-cli", "-p", "6379", "shutdown", "nosave"], capture_output=True)
        _wait(lambda: not _redis_up())
        response = client.post("/manage/c/outage/imports/",
                               {"kind": "problems", "file": SimpleUploadedFile("p.jsonl", rows)})
        assert response.status_code == 302, "the upload is accepted while the broker is down"
        job = ImportJob.objects.get()
        assert (job.status, job.dispatched_at) == ("queued", None)
        training = TrainingJobFactory(kind="prm", dataset_path=str(tmp_path / "missing.jsonl"),
                                      work_dir=str(tmp_path / "train"), output_dir=str(tmp_path / "out"))
        jobs.dispatch(training)
        training.refresh_from_db()
        assert training.celery_task_id == "" and training.status == "queued"
        assert dispatch_pending_imports(older_than=timedelta(0)) == [], "nothing can be sent yet"
    finally:
        Path("/var/lib/redis").mkdir(parents=True, exist_ok=True)
        Path("/var/log/redis").mkdir(parents=True, exist_ok=True)
        if not _redis_up():
            subprocess.run(REDIS_START, check=True)
        _wait(_redis_up)
    assert dispatch_pending_imports(older_than=timedelta(0)) == [job.pk]
    assert dispatch_undispatched(older_than=timedelta(0)) == {"TrainingJob": [training.pk]}
    wait_for(lambda: ImportJob.objects.get(pk=job.pk).is_finished, timeout=120, what="the dispatched import")
    job.refresh_from_db()
    assert job.status == "succeeded" and job.imported == 5, (job.status, job.error)
    assert dispatch_pending_imports(older_than=timedelta(0)) == [], "sent once"

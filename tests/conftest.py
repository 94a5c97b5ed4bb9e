"""Shared fixtures: real PostgreSQL (pytest-django's test database), Redis, a real Celery worker."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("STEPLAB_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.exists():
        pytest.fail(f"the shared data folder {DATA} is missing (set STEPLAB_SHARED)")
    return DATA


@pytest.fixture
def make_user(django_user_model):  # type: ignore[no-untyped-def]
    def make(username: str, *, password: str = "pw-Steplab-1", **extra):  # type: ignore[no-untyped-def]
        return django_user_model.objects.create_user(username=username, password=password, **extra)

    return make


@pytest.fixture
def campaign_factory(db):  # type: ignore[no-untyped-def]
    from annotate.models import Campaign

    def make(slug: str = "c1", **fields):  # type: ignore[no-untyped-def]
        fields.setdefault("name", slug)
        return Campaign.objects.create(slug=slug, **fields)

    return make


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):  # type: ignore[no-untyped-def]
    """A real `celery worker` subprocess on Redis, connected to the test database."""
    if not settings.REDIS_URL:
        pytest.fail("REDIS_URL must point at a real Redis for worker tests")
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        if db["ENGINE"].endswith("postgresql") else f"sqlite:///{db['NAME']}"
    )
    env["DB_CONN_MAX_AGE"] = "0"
    from steplab.celery import app

    app.control.purge()
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "steplab", "worker", "-Q", "default,gpu", "-c", "2",
         "--pool", "prefork", "-n", f"test-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        replies = app.control.ping(timeout=1.0)
        if replies:
            break
        if process.poll() is not None:
            pytest.fail(f"celery worker exited: {process.stdout.read() if process.stdout else ''}")
    else:
        process.kill()
        pytest.fail("celery worker did not answer a ping within 60 s")
    yield process
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Fault-injection tests restart PostgreSQL and Redis: run them after everything else."""
    items.sort(key=lambda item: item.get_closest_marker("faults") is not None)


def kill_pool_process(worker: subprocess.Popen) -> int:  # type: ignore[type-arg]
    """SIGKILL the single pool process of a prefork worker started with -c 1 (the main process lives on)."""
    path = Path(f"/proc/{worker.pid}/task/{worker.pid}/children")
    children = [int(p) for p in path.read_text().split()] if path.exists() else []
    assert len(children) == 1, f"expected one pool process, found {children}"
    os.kill(children[0], signal.SIGKILL)
    return children[0]


@pytest.fixture
def killable_worker(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Start a private `celery worker -c 1` (a test kills its pool process) on its own queue; extra keyword
    arguments go into its environment. Returns (process, queue, log path)."""
    if not settings.REDIS_URL:
        pytest.fail("REDIS_URL must point at a real Redis for worker tests")
    from steplab.celery import app

    db = settings.DATABASES["default"]
    started: list[tuple[subprocess.Popen, object]] = []  # type: ignore[type-arg]

    def start(name: str, **env: str) -> tuple[subprocess.Popen, str, Path]:  # type: ignore[type-arg]
        queue = f"{name}-{os.getpid()}"
        environment = dict(os.environ, DB_CONN_MAX_AGE="0", **env,
                           DATABASE_URL=f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:"
                                        f"{db['PORT'] or 5432}/{db['NAME']}")
        log_path = tmp_path / f"{name}-worker.log"
        log = open(log_path, "w")  # noqa: SIM115 — the worker writes to it until the teardown closes it
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "steplab", "worker", "-Q", queue, "-c", "1", "--pool", "prefork",
             "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"],
            cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
        )
        started.append((process, log))
        deadline = time.time() + 60
        while not app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=1):
            assert process.poll() is None and time.time() < deadline, log_path.read_text()
        return process, queue, log_path

    yield start
    for process, log in started:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()  # type: ignore[attr-defined]

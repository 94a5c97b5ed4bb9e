"""Shared fixtures: real PostgreSQL (pytest-django's test database), Redis, a real Celery worker."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import expect

# Playwright's `expect` polls until its condition holds; its 5 s default deadline was too short on a loaded CI
# runner, where three rating POSTs typed in a row (each a transaction and a re-rendered row) took longer.
expect.set_options(timeout=15_000)

# The PRM800K-derived training data and the one PRM trained per session, for every folder that needs them.
pytest_plugins = ["tests.trained_models"]

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Django's advice for test suites: a fast password hasher. PBKDF2 takes 0.25 s per hash or check on these
    cores, and most tests make users and log them in (the access matrix alone spent ~1.5 s of its 1.65 s per case
    on it). PBKDF2 stays listed second so that a hash made by a subprocess (the demo loader) still verifies; what
    is under test (who may log in, limits, invitations) does not depend on the algorithm."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                                 *settings.PASSWORD_HASHERS]
SHARED = Path(os.environ.get("STEPLAB_SHARED", ROOT.parent / "shared"))
DATA = SHARED / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.exists():
        pytest.fail(f"the shared data folder {DATA} is missing (set STEPLAB_SHARED)")
    return DATA


@pytest.fixture
def make_user(db):
    from tests.factories import PASSWORD, UserFactory

    def make(username: str, *, password: str = PASSWORD, **extra):
        return UserFactory(username=username, password=password, **extra)

    return make


@pytest.fixture
def campaign_factory(db):
    from tests.factories import CampaignFactory

    def make(slug: str = "c1", **fields):
        return CampaignFactory(slug=slug, **fields)

    return make


@pytest.fixture
def member(make_user):
    """Make ``username`` (or take the existing user of that name) a member of ``campaign`` in ``role``."""
    from django.contrib.auth import get_user_model

    from annotate.models import Role
    from tests.factories import MembershipFactory

    def make(campaign, username: str, role: str = Role.LABELER, **fields):
        user = get_user_model().objects.filter(username=username).first() or make_user(username)
        MembershipFactory(campaign=campaign, user=user, role=role, **fields)
        return user

    return make


@dataclass(frozen=True)
class Personas:
    """Everyone an access test asks about, seen from ``campaign``: its admin (the owner), a researcher and a
    labeler of it, an admin of another campaign, an outsider (no role in ``campaign``) and staff."""

    campaign: Any
    elsewhere: Any  # the other campaign: the other admin's, and the outsider's when it has a role there
    owner: Any
    researcher: Any
    labeler: Any
    other_admin: Any
    outsider: Any
    staff: Any

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)


@pytest.fixture
def personas(db, campaign_factory, make_user):
    """``personas(campaign)`` makes the six people of an access matrix; the keywords cover what the matrices
    differ in: an existing ``labeler``, an existing ``elsewhere`` campaign, the ``outsider_role`` there (None: a
    member of nothing), ``membership`` fields for every membership made, a ``superuser`` staff."""
    from annotate.models import Role
    from tests.factories import MembershipFactory

    def make(campaign, *, labeler=None, elsewhere=None, outsider_role: str | None = None,
             membership: dict[str, Any] | None = None, superuser: bool = False) -> Personas:
        fields = membership or {}
        if elsewhere is None:
            elsewhere = campaign_factory(f"elsewhere-{campaign.slug}"[:64], name="Another campaign")
        people = {name: make_user(name) for name in ("owner", "researcher", "other_admin", "outsider")}
        if labeler is None:
            labeler = make_user("labeler")
            MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER, **fields)
        MembershipFactory(campaign=campaign, user=people["owner"], role=Role.ADMIN, **fields)
        MembershipFactory(campaign=campaign, user=people["researcher"], role=Role.RESEARCHER, **fields)
        MembershipFactory(campaign=elsewhere, user=people["other_admin"], role=Role.ADMIN, **fields)
        if outsider_role is not None:
            MembershipFactory(campaign=elsewhere, user=people["outsider"], role=outsider_role, **fields)
        staff = make_user("staff", is_staff=True, is_superuser=superuser)
        return Personas(campaign=campaign, elsewhere=elsewhere, labeler=labeler, staff=staff, **people)

    return make


# Training hyperparameters small enough for a CPU job of a few seconds.
FAST_HYPER = {"max_steps": 3, "batch_size": 4, "max_length": 128, "logging_steps": 1}


@pytest.fixture
def graded_campaign(campaign_factory, shared_data: Path):
    """The PRM800K phase-1 test trajectories (101 problems, real human step ratings) and the 10 genuine phase-2
    rows, imported with the project's importer. The reconstructed rows carry no grader verdict, so a solution's
    ``is_correct`` (needed by the outcome format) is set from the labeler's finish reason ("solution": every step
    through the answer rated acceptable). Phase-1 trajectories carry no −1 step (negatives are only among the
    alternatives): the phase-2 rows' −1 steps are the negatives; export seed 3 with a 30 % test split puts 2 of
    them in the test split."""
    import uuid

    from annotate.models import Assignment, Solution
    from annotate.services.prm800k_import import import_prm800k

    campaign = campaign_factory(f"graded-{uuid.uuid4().hex[:6]}")
    import_prm800k(shared_data / "prm800k/phase1_test_reconstructed.jsonl", campaign,
                   skip_invalid=True)  # 4 rows: "give_up_or_unknown"
    import_prm800k(shared_data / "prm800k/genuine_rows.jsonl", campaign)
    solved = Assignment.objects.filter(solution__campaign=campaign, finish_reason="solution").values("solution_id")
    Solution.objects.filter(campaign=campaign).update(is_correct=False)
    Solution.objects.filter(pk__in=solved).update(is_correct=True)
    return campaign


@pytest.fixture
def dataset_version(graded_campaign):
    from tests.factories import exported_version

    return exported_version(graded_campaign)


@pytest.fixture
def aime_pool_file(tmp_path: Path, shared_data: Path) -> Path:
    """Three AIME 2025 problems x 8 candidates from the shared best-of-N pool (small enough to score on CPU)."""
    out = tmp_path / "aime_small.jsonl"
    with (shared_data / "bestofn/aime2025_I_k64.jsonl").open(encoding="utf-8") as src, out.open("w") as dst:
        for number, line in enumerate(src):
            if number == 3:
                break
            row = json.loads(line)
            for key in ("generated_responses", "generated_answers"):
                row[key] = row[key][:8]
            dst.write(json.dumps(row) + "\n")
    return out


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    """``tests.waiting.wait_for`` as a fixture, for the tests that take their helpers as fixtures."""
    from tests.waiting import wait_for

    return wait_for


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """Real `celery worker` subprocesses on Redis (one per queue), connected to the test database."""
    if not settings.REDIS_URL:
        pytest.fail("REDIS_URL must point at a real Redis for worker tests")
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        if db["ENGINE"].endswith("postgresql") else f"sqlite:///{db['NAME']}"
    )
    env["DB_CONN_MAX_AGE"] = "0"
    from steplab.celery import WORKER_QUEUES, app, worker_command

    app.control.purge()
    # One process per queue, as the demo and docker-compose run them: a training job's task holds a ``gpu`` slot
    # for its whole run and must not hold up an import (tests/jobs/test_queue_split.py).
    node = f"test{os.getpid()}"
    processes = [subprocess.Popen(
        worker_command(queue, concurrency=2 if queue == "default" else 1, node=node,
                       options=("--pool", "prefork", "--without-gossip", "--without-mingle", "-l", "INFO")),
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) for queue in WORKER_QUEUES]
    names = [f"{node}-{queue}@{os.uname().nodename}" for queue in WORKER_QUEUES]
    deadline = time.time() + 60
    while time.time() < deadline:
        if len(app.control.ping(destination=names, timeout=1.0)) == len(names):
            break
        for process in processes:
            if process.poll() is not None:
                pytest.fail(f"celery worker exited: {process.stdout.read() if process.stdout else ''}")
    else:
        for process in processes:
            process.kill()
        pytest.fail("celery workers did not answer a ping within 60 s")
    yield processes
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def pytest_collection_modifyitems(config, items):
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
def killable_worker(tmp_path: Path):
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

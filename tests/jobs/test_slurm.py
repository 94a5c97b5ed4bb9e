"""Steplab jobs on a real Slurm: a single-node cluster (``scripts/slurm-local``: munged, slurmctld, slurmd on
this machine, no accounting daemon) that ``./run test`` starts, or the session fixture below when the tests
run on their own. Jobs go through the Celery worker and the Slurm backend exactly as on a cluster; only the
cluster's size differs (one node, CPU only: ``gpus_per_job`` 0, one CPU per task).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from annotate.permissions import SYSTEM
from rewards.jobs.backends import BackendError, Launch, SlurmBackend, parse_scontrol_job
from tests.conftest import FAST_HYPER

pytestmark = [pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
SLURM_LOCAL = ROOT / "scripts" / "slurm-local"
LOCAL_DIR = Path(os.environ.get("STEPLAB_SLURM_DIR", ROOT / "var" / "slurm"))
# Set while the tests are collected, before any fixture starts the Celery worker: the worker (its own
# process, its own settings) reads the cluster and the one-node sizing from its environment.
os.environ.setdefault("SLURM_CONF", str(LOCAL_DIR / "slurm.conf"))
os.environ.setdefault("STEPLAB_SLURM_GPUS_PER_JOB", "0")
os.environ.setdefault("STEPLAB_SLURM_CPUS_PER_TASK", "1")
ONE_NODE = {"gpus_per_job": "0", "cpus_per_task": 1}
BUSY_HYPER = {**FAST_HYPER, "max_steps": 100000}  # runs until stopped (cancel, kill)


def _answers() -> bool:
    if shutil.which("scontrol") is None:  # not installed yet: scripts/slurm-local installs it
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return ping.returncode == 0 and "is UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """The Slurm of ``SLURM_CONF``; the local one is started when it does not answer, and stopped after the
    session only when this fixture started it."""
    conf = Path(os.environ["SLURM_CONF"])
    if _answers():
        yield conf
        return
    if conf != LOCAL_DIR / "slurm.conf":
        pytest.fail(f"SLURM_CONF={conf} does not answer `scontrol ping`; start that cluster or unset SLURM_CONF")
    started = subprocess.run([str(SLURM_LOCAL), "start", str(LOCAL_DIR)], capture_output=True, text=True,
                             check=False)
    if started.returncode != 0:
        pytest.fail(f"scripts/slurm-local start failed: {started.stderr}")
    yield conf
    if started.stdout.strip() == "started":
        subprocess.run([str(SLURM_LOCAL), "stop", str(LOCAL_DIR)], check=False)


@pytest.fixture
def slurm(slurm_cluster, settings) -> SlurmBackend:
    settings.STEPLAB_SLURM = {**settings.STEPLAB_SLURM, **ONE_NODE}
    return SlurmBackend()


def _status(job):
    job.refresh_from_db()
    return job.status


def _slurm_state(job_id: str) -> str:
    record = SlurmBackend(options=ONE_NODE).record(job_id)
    return record.state if record else ""


def _launch(tmp_path: Path, name: str, *commands: list[str]) -> Launch:
    return Launch(name=name, work_dir=tmp_path / name, commands=list(commands))


def _until_finished(backend: SlurmBackend, launch: Launch, job_id: str, wait_for, timeout: float = 60):
    return wait_for(lambda: (r := backend.poll(launch, job_id)).finished and r, timeout=timeout, every=0.2,
                    what=f"Slurm job {job_id} to end")


@pytest.fixture(scope="module")
def timeout_job(slurm_cluster, tmp_path_factory) -> tuple[SlurmBackend, Launch, str]:
    """A job over its one-minute limit (Slurm's smallest), submitted with the module's first test so that its
    minute passes while the others run."""
    backend = SlurmBackend(options={**ONE_NODE, "time_limit": "1"})
    launch = _launch(tmp_path_factory.mktemp("slurm-timeout"), "steplab-timeout", ["sleep", "600"])
    return backend, launch, backend.submit(launch)


@pytest.mark.worker
@pytest.mark.training
@pytest.mark.django_db(transaction=True)
def test_prm_training_and_scoring_run_on_slurm(slurm_cluster, timeout_job, celery_worker_process, dataset_version,
                                               aime_pool_file, wait_for, record_property) -> None:
    from rewards.jobs.models import CandidateScore, JobStatus, RewardModel
    from rewards.jobs.services.pools import import_pool
    from rewards.jobs.services.scoring import start_scoring_job
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    job = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, backend="slurm",
                                             hyper={**FAST_HYPER, "max_steps": 1}), user=SYSTEM)
    seen = set()
    wait_for(lambda: seen.add(_status(job)) or job.status in ("succeeded", "failed", "cancelled"),
             timeout=300, every=0.2, what="the PRM job on Slurm to end")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert "running" in seen and job.external_id.isdigit()
    assert _slurm_state(job.external_id) == "COMPLETED"  # it ran as a Slurm job, and the queue says so
    script = (Path(job.work_dir) / "run.sh").read_text()
    assert "#SBATCH --job-name=steplab-train-" in script and "--gres" not in script
    seconds = (job.finished_at - job.created_at).total_seconds()
    shown = subprocess.run(["scontrol", "show", "job", "-o", job.external_id], capture_output=True, text=True,
                           check=True).stdout
    times = {key: datetime.fromisoformat(value) for key, value in re.findall(r"(SubmitTime|StartTime|EndTime)=(\S+)",
                                                                            shown)}
    in_queue = (times["StartTime"] - times["SubmitTime"]).total_seconds()
    on_node = (times["EndTime"] - times["StartTime"]).total_seconds()
    record_property("slurm_one_step_submit_to_succeeded_s", round(seconds, 1))
    print(f"one-step PRM job on the local Slurm: {seconds:.1f} s from submit to succeeded "
          f"(Slurm: {in_queue:.0f} s queued, {on_node:.0f} s on the node)")
    assert job.step == 1 and job.progress == 1.0 and job.metrics["train"]["steps"] == 1
    model = RewardModel.objects.get(job=job)
    assert model.kind == "prm" and model.dataset_version == dataset_version
    assert (Path(model.location) / "model.safetensors").is_file()

    pool, _ = import_pool(aime_pool_file, "aime-slurm", campaign=dataset_version.campaign)
    scoring = start_scoring_job(model, pool=pool, backend="slurm", user=SYSTEM)
    wait_for(lambda: _status(scoring) in ("succeeded", "failed", "cancelled"), timeout=300,
             what="the scoring job on Slurm to end")
    assert scoring.status == JobStatus.SUCCEEDED, scoring.error
    assert scoring.external_id.isdigit() and _slurm_state(scoring.external_id) == "COMPLETED"
    assert CandidateScore.objects.filter(scoring_job=scoring).count() == 24
    assert scoring.step_metrics["solutions"] > 0


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_cancel_from_steplab_and_scancel_from_outside(slurm_cluster, celery_worker_process, dataset_version,
                                                     wait_for) -> None:
    from rewards.jobs.models import JobStatus
    from rewards.jobs.services.training import TrainingRequest, request_cancel, start_training_job

    ours = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, backend="slurm",
                                              hyper=BUSY_HYPER), user=SYSTEM)
    theirs = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, backend="slurm",
                                                hyper=BUSY_HYPER), user=SYSTEM)
    for job in (ours, theirs):
        # Waited for within this iteration: the closure never outlives its `job`.
        wait_for(lambda: _status(job) == "running" and job.external_id  # noqa: B023
                 and _slurm_state(job.external_id) == "RUNNING",  # noqa: B023
                 timeout=120, every=0.2, what="the job to run on Slurm")

    request_cancel(ours)  # the watcher runs scancel
    wait_for(lambda: _status(ours) != "running", timeout=60, every=0.2, what="the cancelled job to stop")
    assert (ours.status, ours.error) == (JobStatus.CANCELLED, "cancelled on request")
    wait_for(lambda: _slurm_state(ours.external_id) == "CANCELLED", timeout=30, every=0.2,
             what="Slurm to show the job cancelled")

    subprocess.run(["scancel", theirs.external_id], check=True)  # an admin, or the cluster's own policy
    wait_for(lambda: _status(theirs) != "running", timeout=60, every=0.2, what="the scancelled job to end")
    assert theirs.status == JobStatus.CANCELLED
    assert theirs.error.startswith(f"Slurm job {theirs.external_id} CANCELLED")


def batch_pids(job_id: str) -> list[int]:
    """The processes of a job's batch step: first the one slurmd launched (the batch script), then its children;
    empty until slurmstepd has started them."""
    pids = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True, check=False).stdout
    rows = sorted((row for row in (line.split() for line in pids.splitlines()[1:]) if row[2] == "batch"),
                  key=lambda row: row[3] != "0")
    pids = [int(row[0]) for row in rows] if rows and rows[0][3] == "0" else []
    return [pid for pid in pids if _runs_job(pid, job_id)]


def _runs_job(pid: int, job_id: str) -> bool:
    """Whether the process carries this job's SLURM_JOB_ID. proctrack/linuxproc can list processes that are not the
    job's (seen: the cluster's own daemons and PostgreSQL when the cluster was started by ./run), and this test
    must never SIGKILL those."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"SLURM_JOB_ID={job_id}".encode() in environ.split(b"\0")


def kill_batch(job_id: str, wait_for) -> None:
    """SIGKILL the job's processes on the node at once (proctrack/linuxproc would lose track of a child whose
    parent died first, and it would go on training)."""
    for pid in wait_for(lambda: batch_pids(job_id), timeout=60, every=0.2, what="the batch process"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.django_db(transaction=True)
def test_a_killed_node_process_is_failed_by_the_reaper_with_the_queue_reason(slurm, dataset_version, wait_for,
                                                                            settings) -> None:
    """The watcher is gone (its worker died) and so is the job's process on the node: the reaper asks Slurm,
    which still knows how the job ended, instead of only saying that the heartbeats stopped."""
    from rewards.jobs.kinds import registry
    from rewards.jobs.models import JobStatus, TrainingJob
    from rewards.jobs.services import runner
    from rewards.jobs.services.training import TrainingRequest, start_training_job, training_hooks

    with transaction.atomic():  # recorded as sent: no watcher task, this test plays the watcher
        job = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, backend="slurm",
                                                 hyper=BUSY_HYPER), user=SYSTEM)
        TrainingJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now())
    job = runner.claim(TrainingJob, job.pk)  # what the watcher did before its worker died
    external_id = slurm.submit(training_hooks(job).launch)
    TrainingJob.objects.filter(pk=job.pk).update(external_id=external_id)
    try:
        kill_batch(external_id, wait_for)
        wait_for(lambda: _slurm_state(external_id) not in ("RUNNING", "COMPLETING"), timeout=60, every=0.2,
                 what="Slurm to notice the dead process")
    finally:
        subprocess.run(["scancel", external_id], check=False)  # never leave a trainer running after a failure

    stale = timezone.now() - timedelta(seconds=settings.STEPLAB_JOB_HEARTBEAT_TIMEOUT_S + 60)
    TrainingJob.objects.filter(pk=job.pk).update(heartbeat_at=stale)
    assert registry.get("training").reap() == [job.pk]
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error.startswith(f"Slurm job {external_id} FAILED (") and "signal 9" in job.error
    assert "worker lost" not in job.error


def test_queue_states_map_to_steplab_states(slurm, timeout_job, tmp_path: Path, wait_for) -> None:
    python = sys.executable
    held = _launch(tmp_path, "held", ["true"])
    held_id = SlurmBackend(options={**ONE_NODE, "sbatch_options": ["--hold"]}).submit(held)
    pending = slurm.poll(held, held_id)
    assert (pending.state, pending.finished) == ("running", False)  # queued on Slurm = running for Steplab
    assert pending.reason.startswith(f"Slurm job {held_id} PENDING (JobHeldUser)")
    subprocess.run(["scontrol", "release", held_id], check=True)
    assert _until_finished(slurm, held, held_id, wait_for).state == "succeeded"

    busy = _launch(tmp_path, "busy", ["sleep", "600"])
    busy_id = slurm.submit(busy)
    running = wait_for(lambda: "RUNNING" in (r := slurm.poll(busy, busy_id)).reason and r, timeout=30, every=0.2,
                       what="RUNNING")
    assert running.state == "running"
    subprocess.run(["scancel", busy_id], check=True)
    cancelled = _until_finished(slurm, busy, busy_id, wait_for)
    assert cancelled.state == "cancelled" and f"Slurm job {busy_id} CANCELLED" in cancelled.reason

    ok = _launch(tmp_path, "ok", [python, "-c", "print('fine')"])
    completed = _until_finished(slurm, ok, slurm.submit(ok), wait_for)
    assert (completed.state, completed.exit_code) == ("succeeded", 0)
    assert (ok.work_dir / "stdout.log").read_text() == "fine\n"

    bad = _launch(tmp_path, "bad", [python, "-c", "import sys; sys.exit(3)"])
    bad_id = slurm.submit(bad)
    failed = _until_finished(slurm, bad, bad_id, wait_for)
    assert (failed.state, failed.exit_code) == ("failed", 3)
    assert failed.reason.startswith(f"Slurm job {bad_id} FAILED (NonZeroExitCode; exit code 3)")

    backend, launch, job_id = timeout_job
    timed_out = _until_finished(backend, launch, job_id, wait_for, timeout=240)  # 1 min + the controller's check
    assert (timed_out.state, timed_out.exit_code) == ("failed", None)
    assert timed_out.reason.startswith(f"Slurm job {job_id} TIMEOUT (TimeLimit")


def test_without_accounting_states_come_from_scontrol_and_the_jobcomp_log(slurm, tmp_path: Path, wait_for) -> None:
    """This cluster has no slurmdbd: sacct refuses, the backend notices once and reads the controller, then the
    job-completion log for jobs the controller has forgotten."""
    if not SlurmBackend(options={"states_from": "scontrol"}).jobcomp_log():
        pytest.fail("the test cluster must keep a jobcomp/filetxt log (scripts/slurm-local writes one)")
    bad = _launch(tmp_path, "bad", [sys.executable, "-c", "import sys; sys.exit(4)"])
    bad_id = slurm.submit(bad)
    _until_finished(slurm, bad, bad_id, wait_for)
    assert SlurmBackend._accounting[os.environ["SLURM_CONF"]] is False
    refused = SlurmBackend(options={"states_from": "sacct"})
    with pytest.raises(BackendError, match="accounting storage is disabled"):
        refused.poll(bad, bad_id)

    shown = subprocess.run(["scontrol", "show", "job", "-o", bad_id], capture_output=True, text=True, check=True)
    from_controller = parse_scontrol_job(shown.stdout, bad_id)
    log = SlurmBackend(options={"states_from": "scontrol"}).jobcomp_log()
    assert log is not None
    from_log = wait_for(lambda: parse_scontrol_job(log.read_text(), bad_id, source="jobcomp"), timeout=30,
                        what="the job-completion log line")
    assert from_controller is not None
    assert (from_controller.state, from_controller.exit_code, from_controller.nodes) \
        == (from_log.state, from_log.exit_code, from_log.nodes) == ("FAILED", 4, from_controller.nodes)
    assert from_controller.nodes  # the node it ran on

    gone = SlurmBackend(options={"states_from": "scontrol", "jobcomp_log": str(log)})
    unknown = gone.poll(_launch(tmp_path, "never", ["true"]), "99999999")
    assert unknown.state == "lost" and "unknown to sacct, scontrol and the jobcomp log" in unknown.reason

"""The Slurm backend on a cluster that keeps accounting: a second single-node Slurm with slurmdbd on a MariaDB of
its own (``scripts/slurm-local start DIR --accounting``, other ports than the suite's cluster), started and
stopped by this module. Here ``sacct`` answers, so the job states and the reasons come from accounting."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rewards.jobs.backends import Launch, SlurmBackend
from tests.jobs.test_slurm import kill_batch

pytestmark = [pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
SLURM_LOCAL = ROOT / "scripts" / "slurm-local"
# Not under pytest's temporary folder: munged wants every folder above its socket open to all (pytest's are 0700).
FOLDER = ROOT / "var" / "slurm-accounting"
PORTS = {"STEPLAB_SLURMCTLD_PORT": "6837", "STEPLAB_SLURMD_PORT": "6838", "STEPLAB_SLURMDBD_PORT": "6839",
         "STEPLAB_SLURM_MARIADB_PORT": "3327"}


@pytest.fixture(scope="module")
def accounting_conf() -> Iterator[str]:
    folder = FOLDER
    env = {**os.environ, **PORTS}
    started = subprocess.run([str(SLURM_LOCAL), "start", str(folder), "--accounting"], env=env, capture_output=True,
                             text=True, check=False, timeout=600)
    if started.returncode != 0:
        subprocess.run([str(SLURM_LOCAL), "stop", str(folder)], env=env, check=False)
        pytest.fail(f"scripts/slurm-local start --accounting failed: {started.stdout} {started.stderr}")
    yield str(folder / "slurm.conf")
    if started.stdout.strip() == "started":  # not when it was already running: only what this module started
        subprocess.run([str(SLURM_LOCAL), "stop", str(folder)], env=env, check=False)


@pytest.fixture
def cluster(accounting_conf: str, monkeypatch) -> str:
    monkeypatch.setenv("SLURM_CONF", accounting_conf)  # sbatch, sacct, scontrol, scancel of this cluster
    return accounting_conf


def _launch(tmp_path: Path, name: str, *commands: list[str]) -> Launch:
    return Launch(name=name, work_dir=tmp_path / name, commands=list(commands))


def _from_accounting(backend: SlurmBackend, job_id: str, state: str, wait_for):
    """The job's record once accounting has it in ``state`` (slurmctld sends it to slurmdbd a moment later)."""
    return wait_for(lambda: (r := backend.record(job_id)) and r.source == "sacct" and r.state == state and r,
                    timeout=60, every=0.2, what=f"sacct to show job {job_id} {state}")


def test_states_and_reasons_come_from_sacct(cluster: str, tmp_path: Path, wait_for) -> None:
    auto = SlurmBackend(options={"gpus_per_job": "0", "cpus_per_task": 1, "states_from": "auto"})
    bad = _launch(tmp_path, "bad", [sys.executable, "-c", "import sys; sys.exit(3)"])
    bad_id = auto.submit(bad)
    _from_accounting(auto, bad_id, "FAILED", wait_for)
    assert SlurmBackend._accounting[cluster] is True  # auto found accounting and keeps asking sacct first
    failed = auto.poll(bad, bad_id)
    assert (failed.state, failed.exit_code) == ("failed", 3)
    assert failed.reason.startswith(f"Slurm job {bad_id} FAILED (exit code 3) on node ")
    assert failed.reason.endswith(" [sacct]")

    busy = _launch(tmp_path, "busy", ["sleep", "600"])
    busy_id = auto.submit(busy)
    _from_accounting(auto, busy_id, "RUNNING", wait_for)
    kill_batch(busy_id, wait_for)  # the processes slurmd launched die
    _from_accounting(auto, busy_id, "FAILED", wait_for)
    killed = auto.poll(busy, busy_id)
    assert (killed.state, killed.exit_code) == ("failed", None)
    assert killed.reason.startswith(f"Slurm job {busy_id} FAILED (exit code 0, signal 9) on node ")

    held = _launch(tmp_path, "held", ["true"])
    held_id = SlurmBackend(options={"cpus_per_task": 1, "sbatch_options": ["--hold"]}).submit(held)
    _from_accounting(auto, held_id, "PENDING", wait_for)
    assert auto.poll(held, held_id).reason == f"Slurm job {held_id} PENDING (JobHeldUser) [sacct]"
    subprocess.run(["scancel", held_id], check=True)
    _from_accounting(auto, held_id, "CANCELLED", wait_for)
    assert auto.poll(held, held_id).state == "cancelled"

    ok = _launch(tmp_path, "ok", ["true"])
    ok_id = auto.submit(ok)
    _from_accounting(auto, ok_id, "COMPLETED", wait_for)
    assert auto.poll(ok, ok_id).state == "succeeded"

"""``./run test`` from a clone inside a folder that is not executable for all (a private home folder, ``mktemp -d``):
the single-node Slurm of ``scripts/slurm-local`` starts there and runs a job. munged refuses a socket below such a
folder ("Socket is inaccessible"), so the script keeps its sockets under /tmp, and says what to do when it cannot."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]


def _free_ports(count: int) -> list[int]:
    """Ports of a cluster of its own: another Slurm (the suite's, a colleague's) keeps its own."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:
            each.bind(("127.0.0.1", 0))
        return [each.getsockname()[1] for each in sockets]
    finally:
        for each in sockets:
            each.close()


@pytest.fixture
def private_clone(tmp_path: Path) -> Path:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)  # whatever the umask: nobody else may enter it
    clone = private / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return clone


def test_slurm_local_starts_and_runs_a_job_from_a_clone_in_a_private_folder(private_clone: Path, wait_for) -> None:
    ctld, slurmd = _free_ports(2)
    env = {key: value for key, value in os.environ.items()
           if key not in ("SLURM_CONF", "STEPLAB_SLURM_DIR", "STEPLAB_SLURM_SOCKETS")}
    env |= {"STEPLAB_SLURMCTLD_PORT": str(ctld), "STEPLAB_SLURMD_PORT": str(slurmd)}
    script = private_clone / "scripts" / "slurm-local"
    state = private_clone / "var" / "slurm"  # the default DIR, inside the private folder
    env["SLURM_CONF"] = str(state / "slurm.conf")
    try:
        started = subprocess.run([str(script), "start"], env=env, capture_output=True, text=True, timeout=600)
        munged_log = (state / "log" / "munged.log")
        assert started.returncode == 0 and started.stdout.strip() == "started", (
            started.stdout, started.stderr, munged_log.read_text() if munged_log.exists() else "")
        conf = (state / "slurm.conf").read_text()
        assert str(private_clone) not in conf.split("AuthInfo=socket=")[1].split("\n")[0]
        out = private_clone / "job.out"
        submitted = subprocess.run(["sbatch", "--parsable", f"--output={out}", "--wrap", "echo ran on slurm"],
                                   env=env, capture_output=True, text=True, timeout=60, cwd=private_clone)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]

        def job_state() -> str:
            shown = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True,
                                   timeout=30)
            return f"the job's output; scontrol says: {shown.stdout or shown.stderr}"

        wait_for(lambda: out.exists() and "ran on slurm" in out.read_text(), timeout=300, what=job_state)
    finally:
        subprocess.run([str(script), "stop"], env=env, capture_output=True, timeout=120)


def test_a_socket_folder_below_a_private_one_is_refused_with_what_to_do(private_clone: Path) -> None:
    """Where the socket folder itself would sit below a private folder, the script says so before munged fails."""
    env = {key: value for key, value in os.environ.items() if key not in ("SLURM_CONF", "STEPLAB_SLURM_DIR")}
    env["STEPLAB_SLURM_SOCKETS"] = str(private_clone / "sockets")
    env["SLURM_CONF"] = str(private_clone / "var" / "slurm" / "slurm.conf")
    refused = subprocess.run([str(private_clone / "scripts" / "slurm-local"), "start"], env=env,
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0
    assert "executable for all" in refused.stderr and "STEPLAB_SLURM_SOCKETS" in refused.stderr, refused.stderr

"""Set-up under contention: ``scripts/apt-get-waiting`` waits for another apt-get's lock, within a bound. apt-get
itself is a stand-in script here: the real one would change this machine's packages."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAITING = ROOT / "scripts" / "apt-get-waiting"


def _fake_apt(tmp_path: Path, busy_runs: int, failure: str = "E: Could not get lock /var/lib/apt/lists/lock. "
                                                              "It is held by process 4242 (apt-get)") -> Path:
    """An apt-get that finds the lock held on its first ``busy_runs`` runs, then succeeds; it records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    script.write_text(f"""#!/usr/bin/env bash
echo "$*" >> {tmp_path}/calls
if [ "$(wc -l < {tmp_path}/calls)" -le {busy_runs} ]; then echo "{failure}" >&2; exit 100; fi
echo done
""")
    script.chmod(0o755)
    return bin_dir


def _run(bin_dir: Path, timeout: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STEPLAB_APT_LOCK_TIMEOUT": str(timeout),
           "STEPLAB_APT_LOCK_POLL": "0"}
    return subprocess.run([str(WAITING), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_held_lock_is_waited_for(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, busy_runs=2), 300, "update", "-qq")
    assert result.returncode == 0 and "done" in result.stdout, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 3 and all(call.startswith("-o DPkg::Lock::Timeout=") and call.endswith("update -qq")
                                   for call in calls)
    assert "holds its lock; trying again" in result.stderr


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, busy_runs=10**6), 0, "install", "-y", "chromium")
    assert result.returncode == 100 and "still holds its lock after 0s" in result.stderr


def test_another_failure_is_not_retried(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, busy_runs=5, failure="E: Unable to locate package nonesuch"), 300,
                  "install", "nonesuch")
    assert result.returncode == 100 and len((tmp_path / "calls").read_text().splitlines()) == 1


@pytest.mark.parametrize("script", ["run", "scripts/slurm-local"])
def test_the_set_up_scripts_install_through_it(script: str) -> None:
    text = (ROOT / script).read_text()
    assert 'apt-get-waiting" install' in text.replace("apt-get-waiting install", 'apt-get-waiting" install')
    assert 'apt-get-waiting" update' in text.replace("apt-get-waiting update", 'apt-get-waiting" update')
    assert "&& DEBIAN_FRONTEND=noninteractive apt-get" not in text

"""``python -m rewards.generation``, the sampler's former name, is the sampler's command line: job folders and
scripts written before the move still run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_old_name_offers_the_same_commands() -> None:
    old, new = _run("rewards.generation", "--help"), _run("rewards.sampling", "--help")
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stdout == new.stdout
    assert "sample" in old.stdout and "rollouts" in old.stdout


@pytest.mark.parametrize(("command", "input_key"), [("sample", "problems"), ("rollouts", "solutions")])
def test_the_old_name_runs_each_command(tmp_path: Path, command: str, input_key: str) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({input_key: "nope.jsonl", "output": "o.jsonl"}), encoding="utf-8")
    old, new = (_run(module, command, "--config", str(job)) for module in ("rewards.generation", "rewards.sampling"))
    assert old.returncode == new.returncode == 2, old.stderr
    assert old.stderr == new.stderr
    assert f"config key '{input_key}' names a file that does not exist" in old.stderr
    assert not (tmp_path / "o.jsonl").exists()

"""``bench/llm_judge.py`` at its smoke size: a real llama.cpp server judges 2 short ProcessBench solutions, and a judge
job of 4 survives the server's restart halfway with none lost and none judged twice."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_llm_judge_bench_smoke(tmp_path: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python[server] is not installed: pip install -e '.[test]'")
    env = {**os.environ, "MEDIA_ROOT": str(tmp_path / "media")}  # the throwaway campaign's files stay in tmp
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "llm_judge.py"), "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    judge = result["judge"]
    assert judge["solutions"] == 2 and judge["per_minute"] > 0 and judge["tokens"] > 0
    assert 0 <= judge["f1"] <= 1 or judge["f1"] != judge["f1"]  # NaN when the subset lacks one group
    restart = result["restart"]
    assert restart["solutions"] == 4 and restart["lost"] == 0 and restart["judged_twice"] == 0
    assert restart["final_status"] == "succeeded"
    assert "first-error F1" in done.stdout

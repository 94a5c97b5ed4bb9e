"""bench/assist.py runs end to end at a tiny size (it once died on an argument the trainer reads): one Monte-Carlo
solution with one rollout, a head PRM trained here in seconds on sixty labeled solutions, eight ProcessBench
solutions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tiny_prm(folder: Path) -> Path:
    from rewards.training import parse_config, run_training

    rows = []
    for i in range(30):
        for wrong in (False, True):
            total = 2 * i + 1 + (7 if wrong else 0)
            ratings = [1, -1, 0] if wrong else [1, 1, 1]
            rows.append({"prompt": f"What is {i} + {i + 1}?", "problem_id": f"p{i}",
                         "completions": [f"We add {i} and {i + 1}.", f"So {i} + {i + 1} = {total}.",
                                         f"The answer is {total}."],
                         "labels": [r >= 0 for r in ratings], "ratings": ratings,
                         "split": "test" if i % 5 == 0 else "train"})
    dataset = folder / "prm.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    run_training(parse_config({"kind": "prm", "dataset": str(dataset), "output_dir": str(folder / "prm"),
                               "method": "head", "max_steps": 50, "base_model": "default"}))
    return folder / "prm"


def test_assist_bench_runs_and_ends_in_its_json_line(tmp_path: Path) -> None:
    prm = _tiny_prm(tmp_path)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "assist.py"), "--prm", str(prm), "--mc-solutions", "1",
         "--rollouts", "1", "--max-new-tokens", "8", "--prm-solutions", "8", "--trials", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["bench"] == "assist" and figures["recipe"]["method"] == "head"
    assert figures["prm"]["n"] == 8 and figures["mc"]["n"] == 1

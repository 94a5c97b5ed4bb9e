"""A dataset the trainer cannot learn from fails with the reason in one sentence, not a hint about another case."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROW = {"prompt": "What is 1+1?", "completions": ["1+1=2", "# Answer\n\n2"], "labels": [True, True],
       "problem_id": "p1", "solution_id": 1}


def _train(tmp_path: Path, rows: list[dict[str, object]]) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"kind": "prm", "dataset": str(data), "base_model": "default",
                                  "output_dir": str(tmp_path / "out")}), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "rewards.training", "train", "--config", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("rows", "reason"), [
    ([], "the PRM dataset has no rows: nothing to train on"),
    ([{**ROW, "split": "test"}, {**ROW, "split": "test", "solution_id": 2}], "all 2 rows are in the 'test' split"),
])
def test_the_reason_there_is_nothing_to_train_on(tmp_path: Path, rows: list[dict[str, object]], reason: str) -> None:
    done = _train(tmp_path, rows)
    assert done.returncode != 0
    assert reason in done.stderr
    assert "check the 'split' column" not in done.stderr

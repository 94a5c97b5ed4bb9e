"""The head's L2 strength is chosen on the training problems alone, by grouped cross-validation."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rewards.training import parse_config, run_training
from rewards.training.heads.tuning import REGULARISATION_GRID

pytestmark = pytest.mark.training

GOLDEN = Path(__file__).parent / "golden"


def _train(tmp_path: Path, name: str, rows: list[str]) -> dict[str, Any]:
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(rows), encoding="utf-8")
    return run_training(parse_config({"kind": "orm", "dataset": str(data), "base_model": "default",
                                      "method": "head", "negative_weight": "balanced", "seed": 0,
                                      "output_dir": str(tmp_path / name)}))


def test_the_choice_is_the_best_fold_score_and_the_validation_rows_play_no_part(tmp_path: Path) -> None:
    rows = (GOLDEN / "orm.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    held = [row for row in rows if json.loads(row)["split"] == "test"]
    fewer = [row for row in rows if row not in held[: len(held) // 2]]  # half the validation rows gone
    train = {name: _train(tmp_path, name, chosen)["train"] for name, chosen in (("all", rows), ("fewer", fewer))}
    tuning = train["all"]["tuning"]
    assert tuning == train["fewer"]["tuning"]
    means = tuning["mean_auroc"]
    assert set(means) == {str(c) for c in REGULARISATION_GRID} and tuning["folds"] == 3
    assert tuning["chosen"] == float(max(means, key=means.__getitem__)) == train["all"]["regularisation"]

"""Training files for the bench smoke runs: sixty labeled sums (half with a wrong middle step) as ``prm.jsonl``,
``orm.jsonl`` and ``counts.json``, as ``bench/reward_quality.py --write-datasets`` writes them."""
from __future__ import annotations

import json
from pathlib import Path


def tiny_training_files(folder: Path) -> Path:
    """Write the three files into ``folder`` (made if missing) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    prm, orm = [], []
    for i in range(30):
        for wrong in (False, True):
            total = 2 * i + 1 + (7 if wrong else 0)
            ratings = [1, -1, 0] if wrong else [1, 1, 1]
            steps = [f"We add {i} and {i + 1}.", f"So {i} + {i + 1} = {total}.", f"The answer is {total}."]
            split = "test" if i % 5 == 0 else "train"
            prm.append({"prompt": f"What is {i} + {i + 1}?", "problem_id": f"p{i}", "completions": steps,
                        "labels": [r >= 0 for r in ratings], "ratings": ratings, "split": split, "path": "chosen"})
            orm.append({"prompt": f"What is {i} + {i + 1}?", "problem_id": f"p{i}", "completion": "\n".join(steps),
                        "label": not wrong, "split": split})
    for name, rows in (("prm.jsonl", prm), ("orm.jsonl", orm)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    counts = {"labelings": 60, "prm_rows": 60, "chosen_steps": 180, "chosen_negatives": 30, "alternative_rows": 0,
              "alternative_negatives": 0, "orm_rows": 60, "outcome_correct": 30, "outcome_wrong": 30,
              "outcome_ungradable": 0}
    (folder / "counts.json").write_text(json.dumps(counts), encoding="utf-8")
    return folder

"""Real PRM800K data converted to the exporter's formats, and one PRM trained on it once per session; no Django.

A pytest plugin of tests/conftest.py, so that every folder shares the one trained PRM (``trained_prm``): the
training tests assert on its run, the tests that only need a trained PRM (tests/labeling_rounds) reuse its folder.

Conversion (PRM800K phase-1 test, 101 problems, real human ratings):
* trajectory: for each labeled step, the human-written step if any (counts as +1, the exporter's
  rule), else the chosen completion with its rating; where nothing was chosen the labeler stopped at
  a wrong step, so the first −1 candidate is taken. Stop after the first −1.
* branches: the chosen prefix plus one −1-rated candidate the labeler did not choose (up to 2 per
  problem), so that the step labels have real negatives (the chosen path is nearly all positive).
* outcome label (ORM): the reconstructed rows carry no grader verdict, so a trajectory counts as
  correct when ``finish_reason == "solution"`` (the labeler rated every step through the final
  answer as acceptable); branch rows, which end in a human-rated wrong step, count as incorrect.
* split: every fifth problem is ``test``.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PRM800K_TEST = Path("/work/shared/data/prm800k/phase1_test_reconstructed.jsonl")
BRANCHES_PER_PROBLEM = 2


def _trajectory(row: dict[str, Any]) -> tuple[list[str], list[int]]:
    steps: list[str] = []
    ratings: list[int] = []
    for step in row["label"]["steps"]:
        human = step.get("human_completion")
        human_text = human.get("text") if isinstance(human, dict) else human
        chosen = step.get("chosen_completion")
        if human_text:
            text, rating = human_text, 1
        elif chosen is not None:
            text, rating = step["completions"][chosen]["text"], step["completions"][chosen]["rating"]
        else:
            wrong = [c["text"] for c in step["completions"] if c["rating"] == -1]
            if not wrong:
                break
            text, rating = wrong[0], -1
        if rating is None:
            break
        steps.append(text)
        ratings.append(rating)
        if rating == -1:
            break
    return steps, ratings


def _branches(row: dict[str, Any], steps: list[str], ratings: list[int]) -> list[tuple[list[str], list[int]]]:
    found: list[tuple[list[str], list[int]]] = []
    for index, step in enumerate(row["label"]["steps"][:len(steps)]):
        for number, candidate in enumerate(step["completions"]):
            unchosen = number != step.get("chosen_completion") and candidate["text"] != steps[index]
            if candidate["rating"] == -1 and unchosen:
                found.append((steps[:index] + [candidate["text"]], ratings[:index] + [-1]))
                break
        if len(found) == BRANCHES_PER_PROBLEM:
            break
    return found


def convert_prm800k(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(trl-stepwise rows, outcome rows) in the Steplab exporter's contracts."""
    stepwise: list[dict[str, Any]] = []
    outcome: list[dict[str, Any]] = []
    solution_id = 0
    for number, row in enumerate(rows):
        steps, ratings = _trajectory(row)
        if not steps:
            continue
        meta = {"split": "test" if number % 5 == 0 else "train",
                "problem_id": row.get("_derived", {}).get("math500_unique_id") or f"p{number}"}
        solved = row["label"]["finish_reason"] == "solution"
        variants = [("trajectory", (steps, ratings)), *[("branch", b) for b in _branches(row, steps, ratings)]]
        for kind, (texts, marks) in variants:
            solution_id += 1
            prompt = row["question"]["problem"]
            stepwise.append({"prompt": prompt, "completions": texts, "labels": [r >= 0 for r in marks],
                             "ratings": marks, **meta, "solution_id": solution_id})
            outcome.append({"prompt": prompt, "completion": "\n".join(texts),
                            "label": solved and kind == "trajectory", **meta, "solution_id": solution_id})
    return stepwise, outcome


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def converted() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [json.loads(line) for line in PRM800K_TEST.read_text(encoding="utf-8").splitlines() if line.strip()]
    return convert_prm800k(rows)


@pytest.fixture(scope="session")
def stepwise_file(converted: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("data") / "prm.jsonl", converted[0])


@pytest.fixture(scope="session")
def outcome_file(converted: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                 tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("data") / "orm.jsonl", converted[1])


#: real CPU training runs of the tests: ~30 steps of 8 x 256 tokens, enough for a real signal (step AUROC ≈ 0.9)
FAST = {"base_model": "default", "max_steps": 30, "batch_size": 8, "max_length": 256, "learning_rate": 1e-4,
               "logging_steps": 1, "seed": 0}


@dataclass(frozen=True)
class TrainedRun:
    dataset: Path
    folder: Path
    metrics: dict[str, Any]
    seconds: float


@pytest.fixture(scope="session")
def trained_prm(stepwise_file: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """One PRM trained in-process on ``stepwise_file`` (``FAST``), its folder a registrable model."""
    from rewards.training import parse_config, run_training

    out = tmp_path_factory.mktemp("prm")
    started = time.time()
    metrics = run_training(parse_config({**FAST, "kind": "prm", "dataset": str(stepwise_file),
                                         "output_dir": str(out)}))
    return TrainedRun(stepwise_file, out, metrics, time.time() - started)

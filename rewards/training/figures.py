"""Figures both trainers report on scored rows, and the cross-fitting of the first-error threshold over training
problems that both run (the head refits itself per fold, fine-tuning fine-tunes per fold)."""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..evaluation.step_metrics import calibrate_threshold, distinct_steps, sibling_pair_accuracy, step_auroc

CROSSFIT_SOURCE = "training problems, cross-fitted"


def aggregate(step_scores: Sequence[float], how: str) -> float:
    """Solution score from step scores: "product" (the paper's rule) or "min" (Math-Shepherd's)."""
    if how == "min":
        return float(min(step_scores))
    return float(math.prod(step_scores))


def binary_figures(scores: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Accuracy at 0.5 and AUROC (None when only one class is present)."""
    from sklearn.metrics import roc_auc_score

    both = len(np.unique(labels)) == 2
    return {
        "count": int(len(labels)),
        "positive_rate": float(labels.mean()) if len(labels) else None,
        "accuracy": float(((scores >= 0.5) == (labels == 1)).mean()) if len(labels) else None,
        "auroc": float(roc_auc_score(labels, scores)) if both else None,
    }


def first_errors(truths: Sequence[Sequence[int]]) -> list[int]:
    """Each row's first wrong step (label 0), -1 where there is none."""
    return [next((i for i, v in enumerate(truth) if v == 0), -1) for truth in truths]


def problem_folds(problems: Sequence[str], folds: int, seed: int) -> dict[str, int] | None:
    """Each problem's fold: a seeded order dealt round-robin into ``folds`` folds (fewer with fewer problems);
    None with fewer than two problems."""
    ordered = sorted(set(problems), key=lambda p: hashlib.sha256(f"calibration:{seed}:{p}".encode()).hexdigest())
    count = min(folds, len(ordered))
    if count < 2:
        return None
    return {problem: number % count for number, problem in enumerate(ordered)}


def crossfit_calibration(per_row: Sequence[Sequence[float]], truths: Sequence[Sequence[int]],
                         fold_of: dict[str, int]) -> dict[str, Any] | None:
    """The threshold where first-error F1 peaks over the out-of-fold rows (``calibrate_threshold``), with how it
    was chosen; None without both an erroneous and a correct solution among them."""
    calibration = calibrate_threshold(first_errors(truths), per_row)
    if calibration["threshold"] is None:
        return None
    return {**calibration, "folds": len(set(fold_of.values())), "problems": len(fold_of), "rows": len(per_row),
            "source": CROSSFIT_SOURCE}


def _ratings(labels: Sequence[int]) -> list[int]:
    """Training labels as the evaluation's ratings: +1 correct, −1 wrong, 0 no label (left out)."""
    return [1 if label == 1 else -1 if label == 0 else 0 for label in labels]


def in_context_figures(prompts: Sequence[str], solutions: Sequence[Sequence[str]],
                       step_scores: Sequence[Sequence[float]], labels: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Step AUROC over distinct (problem, prefix, step) triples, each counted once however many rows repeat it,
    and sibling-pair accuracy (``rewards.evaluation.step_metrics``); ``labels``: 1, 0 or ``IGNORE_INDEX`` per
    step of each solution, ``step_scores`` a score per step (an unlabeled step's is not read)."""
    ratings = [_ratings(row) for row in labels]
    scores, kept = distinct_steps(prompts, solutions, step_scores, ratings)
    labeled = [rating for rating in kept if rating != 0]
    both = 1 in labeled and -1 in labeled
    return {"step_level_distinct": {"count": len(labeled),
                                    "auroc": step_auroc(scores, kept, neutral="exclude") if both else None},
            "sibling_pair_accuracy": sibling_pair_accuracy(prompts, solutions, step_scores, ratings,
                                                           neutral="exclude")}

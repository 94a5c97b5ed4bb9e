"""The head's first-error threshold, chosen on the training problems by cross-fitting."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..data import PrmRow
from ..figures import crossfit_calibration, problem_folds
from .features import Examples, problem_of
from .fit import fit_head, labeled, step_scores_of
from .spec import HeadSpec

CALIBRATION_FOLDS = 5


def crossfit_threshold(spec: HeadSpec, examples: Examples, rows: Sequence[PrmRow],
                       row_features: Sequence[np.ndarray], *, folds: int = CALIBRATION_FOLDS,
                       negative_weight: float | str, iterations: int | None, seed: int) -> dict[str, Any] | None:
    """The first-error threshold chosen on the training problems: they are dealt into ``folds`` folds
    (``problem_folds``), each fold's rows are scored by a head fitted on the other folds' ``examples``, and the
    threshold is where first-error F1 peaks over all those out-of-fold rows. Chosen on the validation split
    instead, the F1 reported there at that threshold would be measured on the data that chose it. ``rows``:
    every training row, each step as the compare scores it (not deduped), with its ``row_features``. None with
    fewer than two problems, or when no fold's rows hold both an erroneous and a correct solution."""
    fold_of = problem_folds(list(examples.groups), folds, seed)
    if fold_of is None:
        return None
    example_folds = np.array([fold_of[g] for g in examples.groups])
    row_folds = [fold_of.get(problem_of(row)) for row in rows]  # None: a row with no labeled step to learn from
    per_row: list[list[float]] = []
    truths: list[list[int]] = []
    for fold in sorted(set(fold_of.values())):
        outside = example_folds != fold
        inside = [number for number, row_fold in enumerate(row_folds) if row_fold == fold]
        if len(np.unique(examples.y[outside])) < 2 or not inside:  # the rest cannot fit, or nothing to score
            continue
        head, _ = fit_head(spec, examples.subset(outside), negative_weight=negative_weight, iterations=iterations,
                           seed=seed)
        fold_features = [row_features[n] for n in inside]
        scores = step_scores_of(head, [(rows[n].prompt, rows[n].steps) for n in inside], fold_features.__getitem__)
        for n, row_scores in zip(inside, scores, strict=True):
            step_scores, labels = labeled(row_scores, rows[n])
            if step_scores:
                per_row.append(step_scores)
                truths.append(labels)
    return crossfit_calibration(per_row, truths, fold_of)

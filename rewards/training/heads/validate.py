"""The head's figures on the validation rows, which choose nothing (the threshold came from the training
problems): the same figures fine-tuning reports, with intervals over the rows' problems."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...evaluation.intervals import step_level_intervals
from ...evaluation.step_metrics import calibrate_threshold
from ..data import OrmRow, PrmRow
from ..features import FeatureCache
from ..figures import aggregate, binary_figures, first_errors, in_context_figures
from .features import orm_examples, problem_of, step_features
from .fit import head_scores, labeled, step_scores_of
from .persistence import Head
from .spec import Recipe


class ScoredRows:
    """The validation rows' labeled steps as scored: per row, and flat."""

    def __init__(self, head: Head, cache: FeatureCache | None, rows: Sequence[PrmRow], recipe: Recipe) -> None:
        scores = step_scores_of(head, [(row.prompt, row.steps) for row in rows],
                                lambda n: step_features(cache, rows[n].prompt, rows[n].steps, recipe))
        self.in_context = in_context_figures([row.prompt for row in rows], [row.steps for row in rows],
                                             [list(row_scores) for row_scores in scores],
                                             [row.labels for row in rows])
        self.rows: list[PrmRow] = []
        self.per_row: list[list[float]] = []
        self.truths: list[list[int]] = []
        for row, row_scores in zip(rows, scores, strict=True):
            step_scores, labels = labeled(row_scores, row)
            if step_scores:
                self.rows.append(row)
                self.per_row.append(step_scores)
                self.truths.append(labels)

    def figures(self, aggregation: str) -> dict[str, Any]:
        return {
            "step_level": binary_figures(np.array([s for row in self.per_row for s in row]),
                                         np.array([v for truth in self.truths for v in truth])),
            "solution_level": binary_figures(np.array([aggregate(row, aggregation) for row in self.per_row]),
                                             np.array([int(all(truth)) for truth in self.truths])),
        }

    def intervals(self, threshold: float) -> dict[str, Any] | None:
        """``step_level_intervals`` over the rows' problems (ratings as the compare takes them: +1 correct, or
        neutral, −1 not), the paired gain of the threshold over 0.5 included."""
        if not self.per_row:
            return None
        ratings = [[1 if label else -1 for label in truth] for truth in self.truths]
        return step_level_intervals(self.per_row, ratings, groups=[problem_of(row) for row in self.rows],
                                    threshold=threshold, seed=0)


def prm_validation(head: Head, cache: FeatureCache | None, rows: Sequence[PrmRow], recipe: Recipe,
                   aggregation: str, calibration: dict[str, Any] | None) -> dict[str, Any]:
    """Step- and solution-level figures and the first-error threshold: ``calibration``'s, with the F1 these rows
    give at it and at 0.5 and their intervals; without one, the threshold is calibrated on these rows
    themselves (no interval: they chose it)."""
    scored = ScoredRows(head, cache, rows, recipe)
    figures = scored.figures(aggregation)
    if calibration is None:
        figures.update(calibrate_threshold(first_errors(scored.truths), scored.per_row))
        figures["calibration"] = {"source": "validation split"} if figures["threshold"] is not None else None
    else:
        intervals = scored.intervals(calibration["threshold"])
        figures.update(threshold=calibration["threshold"], calibration=calibration, intervals=intervals,
                       f1_calibrated=((intervals or {}).get("first_error_f1_calibrated") or {}).get("value"),
                       f1_at_default=((intervals or {}).get("first_error_f1") or {}).get("value"))
    return {**figures, **scored.in_context}


def orm_validation(head: Head, cache: FeatureCache | None, rows: Sequence[OrmRow], recipe: Recipe) -> dict[str, Any]:
    examples = orm_examples(cache, rows, recipe)
    return {"solution_level": binary_figures(head_scores(head, examples.x, examples.texts), examples.y)}

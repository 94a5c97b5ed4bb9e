"""The sanity checks (``rewards.evaluation.sanity``) run on a trained PRM's validation solutions: does it read the
maths, or the answer format, a phrase, the position?"""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..evaluation.sanity import SanitySolution, sanity_checks
from .data import PrmRow
from .scoring import ScoringModel

#: validation solutions the checks perturb at most (a seeded sample beyond): each check scores every step of
#: each once more, and the comparison that trains this model has a time budget
SANITY_SOLUTIONS = 300


def _solution(row: PrmRow) -> SanitySolution:
    first_error = next((index for index, label in enumerate(row.labels) if label == 0), None)
    return SanitySolution(row.prompt, list(row.steps), first_error)


def sanity_figures(model: ScoringModel, rows: Sequence[PrmRow], *, seed: int) -> dict[str, Any] | None:
    """The checks' report on the distinct validation solutions (None without any), NaN written as None."""
    distinct = list({(row.prompt, row.steps): row for row in rows if row.steps}.values())
    if not distinct:
        return None
    if len(distinct) > SANITY_SOLUTIONS:
        distinct = random.Random(seed).sample(distinct, SANITY_SOLUTIONS)
    report = sanity_checks([_solution(row) for row in distinct],
                           lambda batch: model.score_steps_batch([(s.problem, s.steps) for s in batch]), seed=seed)
    return {check: {name: None if isinstance(value, float) and math.isnan(value) else value
                    for name, value in figures.items()}
            for check, figures in report.as_dict().items()}

"""The head's first-error threshold, chosen on the training problems by cross-fitting: on the out-of-fold scores
that choosing the head's settings already computed (``tuning.Crossfit``), so it fits no head of its own."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..data import IGNORE_INDEX, PrmRow, prefix_digests
from ..figures import crossfit_calibration
from .features import Examples
from .tuning import Crossfit


def crossfit_threshold(examples: Examples, rows: Sequence[PrmRow], crossfit: Crossfit) -> dict[str, Any] | None:
    """The first-error threshold where first-error F1 peaks over the training rows, each labeled step scored by
    the head fitted on the folds its problem is not in (``crossfit``: those scores of ``examples``). Chosen on
    the validation split instead, the F1 reported there at that threshold would be measured on the data that
    chose it. ``rows``: every training row (not deduped: each step as the compare scores it); a step's score
    depends on its context and text alone, so a step an example was deduped from shares its score. None when no
    fold's rows hold both an erroneous and a correct solution."""
    score_of = {(context, text): float(score)
                for context, text, score in zip(examples.contexts, examples.texts, crossfit.scores, strict=True)
                if not np.isnan(score)}
    per_row: list[list[float]] = []
    truths: list[list[int]] = []
    for row in rows:
        before = prefix_digests(row.prompt, row.steps)  # entry i: the problem and the steps before step i
        scored = [(score_of.get((before[i], step)), label)
                  for i, (step, label) in enumerate(zip(row.steps, row.labels, strict=True)) if label != IGNORE_INDEX]
        known = [(score, label) for score, label in scored if score is not None]  # None: its fold was not fitted
        if known:
            per_row.append([score for score, _ in known])
            truths.append([label for _, label in known])
    return crossfit_calibration(per_row, truths, crossfit.fold_of)

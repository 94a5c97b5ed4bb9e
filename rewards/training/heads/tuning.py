"""The regression's L2 strength, chosen per job on its training problems: grouped k-fold cross-validation (a
problem's examples all in one fold), each candidate scored by the mean step (or solution) AUROC of its
out-of-fold predictions. No benchmark and no validation row takes part."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..figures import problem_folds
from .features import Examples
from .fit import fit_head, head_scores
from .lexical import LEXICAL_REGULARISATION
from .models import REGULARISATION
from .spec import HeadModel, HeadSpec

#: the inverse L2 strengths tried, a decade around the defaults either way
REGULARISATION_GRID = (0.1, 0.3, 1.0)
TUNING_FOLDS = 3


def _fold_auroc(spec: HeadSpec, examples: Examples, folds: np.ndarray, fold: int, *,
                negative_weight: float | str, iterations: int | None, seed: int) -> float | None:
    from sklearn.metrics import roc_auc_score

    outside = folds != fold
    inside = examples.subset(~outside)
    if len(np.unique(examples.y[outside])) < 2 or len(np.unique(inside.y)) < 2:
        return None
    head, _ = fit_head(spec, examples.subset(outside), negative_weight=negative_weight, iterations=iterations,
                       seed=seed)
    return float(roc_auc_score(inside.y, head_scores(head, inside.x, inside.texts)))


def choose_regularisation(spec: HeadSpec, examples: Examples, *, negative_weight: float | str,
                          iterations: int | None, seed: int) -> tuple[HeadSpec, dict[str, Any] | None]:
    """The spec with the candidate whose folds score best (a tie: the default), and each candidate's mean AUROC;
    the spec unchanged (and None) for the MLP, or with fewer than two problems or no fold that scores."""
    fold_of = problem_folds(list(examples.groups), TUNING_FOLDS, seed)
    if spec.model is HeadModel.MLP or fold_of is None:
        return spec, None
    folds = np.array([fold_of[g] for g in examples.groups])
    # the regression alone is tuned: the trees beside a lexical one have their own settings
    linear = dataclasses.replace(spec, model=HeadModel.LINEAR)
    means: dict[str, float | None] = {}
    for candidate in REGULARISATION_GRID:
        tried = dataclasses.replace(linear, regularisation=candidate)
        scores = [_fold_auroc(tried, examples, folds, fold, negative_weight=negative_weight,
                              iterations=iterations, seed=seed) for fold in sorted(set(fold_of.values()))]
        known = [score for score in scores if score is not None]
        means[str(candidate)] = float(np.mean(known)) if known else None
    default = LEXICAL_REGULARISATION if spec.recipe.lexical else REGULARISATION
    scored = [(mean, -abs(np.log(float(c) / default)), float(c)) for c, mean in means.items() if mean is not None]
    if not scored:
        return spec, None
    chosen = max(scored)[2]
    return dataclasses.replace(spec, regularisation=chosen), {"chosen": chosen, "folds": len(set(fold_of.values())),
                                                               "mean_auroc": means}

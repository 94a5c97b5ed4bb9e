"""The head's settings, chosen per job on its training problems: grouped k-fold cross-validation (a problem's
examples all in one fold), each candidate scored by the mean step (or solution) AUROC of its out-of-fold
predictions. No benchmark and no validation row takes part. In this order, each at the settings chosen before it,
and a tie keeps the default:

* the regression's L2 strength (``REGULARISATION_GRID``);
* a lexical head's n-gram ``min_df`` (``MIN_DF_GRID``), where the folds hold enough texts for it to apply;
* ``linear+trees``: the trees' leaves and their share of the blend together, from one tree fit per fold and
  leaves candidate whose out-of-fold log-odds are blended with the regression's at every share (share 0: the
  regression alone, so the choice also says whether trees help on this data);
* the MLP: its hidden width, then its dropout at that width.

The out-of-fold scores at the chosen settings are what a head with them, fitted on the other folds, gives each
training example: the first-error threshold is chosen on them (``calibrate``), so it costs no fit of its own.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

from ..figures import problem_folds
from .features import Examples
from .fit import fit_head, head_scores
from .lexical import (
    LEXICAL_MIN_DF,
    LEXICAL_MIN_DF_TEXTS,
    LEXICAL_REGULARISATION,
    TREE_LEAVES,
    TREE_WEIGHT,
    BoostedTrees,
    LexicalHead,
    blended,
    example_weights,
)
from .models import MLP_DROPOUT, MLP_HIDDEN, REGULARISATION, sigmoid
from .spec import HeadModel, HeadSpec

#: the inverse L2 strengths tried, a decade around the defaults either way
REGULARISATION_GRID = (0.1, 0.3, 1.0)
MIN_DF_GRID = (LEXICAL_MIN_DF, 10)
# never the trees alone: a verification column that fires on a few steps cannot split a tree (TREE_MIN_CHILD), the
# regression is what reads it
TREE_WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75)
TREE_LEAVES_GRID = (15, TREE_LEAVES)
MLP_HIDDEN_GRID = (128, MLP_HIDDEN)
MLP_DROPOUT_GRID = (0.1, MLP_DROPOUT)
TUNING_FOLDS = 3

Candidate = TypeVar("Candidate", bound=Hashable)
Predict = Callable[[Examples, Examples], np.ndarray]  # (fit on these, score those): a score per held-out example


@dataclasses.dataclass(frozen=True)
class Crossfit:
    """Each training example's P(correct) from a head with the chosen settings fitted on the other folds (NaN
    where those folds hold one label only and no head was fitted), and each problem's fold."""

    fold_of: dict[str, int]
    scores: np.ndarray


@dataclasses.dataclass(frozen=True)
class Tuned:
    """``choose_settings``' answer: the spec with the chosen settings, how they were chosen (None: nothing was),
    and the out-of-fold scores at them (None with fewer than two problems or no fold that can be fitted)."""

    spec: HeadSpec
    record: dict[str, Any] | None
    crossfit: Crossfit | None


class _Folds:
    """The examples dealt into folds by problem. A fold is fitted where the other folds hold both labels, and
    scored (AUROC) where its own examples do too. ``log_odds``: the scores are log-odds (a lexical head's),
    ranked as the head's P(correct) (in float64 the sigmoid ties the most extreme ones, as scoring does)."""

    def __init__(self, examples: Examples, fold_of: dict[str, int], *, log_odds: bool) -> None:
        self.y, self.log_odds, self.fold_of = examples.y, log_odds, fold_of
        self.of_example = np.array([fold_of[g] for g in examples.groups])
        self.count = len(set(fold_of.values()))
        self.splits: dict[int, tuple[Examples, Examples]] = {}
        for fold in sorted(set(fold_of.values())):
            outside = self.of_example != fold
            if len(np.unique(self.y[outside])) == 2:
                self.splits[fold] = examples.subset(outside), examples.subset(~outside)
        self.scored = [fold for fold in self.splits if len(np.unique(self.y[self.of_example == fold])) == 2]

    def out_of_fold(self, predict: Predict) -> dict[int, np.ndarray]:
        """Each fitted fold's held-out scores, from a fit on the other folds."""
        return {fold: predict(train, held) for fold, (train, held) in self.splits.items()}

    def probabilities(self, scores: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        return {fold: sigmoid(held) for fold, held in scores.items()} if self.log_odds else scores

    def mean_auroc(self, scores: dict[int, np.ndarray]) -> float:
        from sklearn.metrics import roc_auc_score

        return float(np.mean([roc_auc_score(self.y[self.of_example == fold], held)
                              for fold, held in self.probabilities(scores).items() if fold in self.scored]))

    def crossfit(self, scores: dict[int, np.ndarray]) -> Crossfit:
        every = np.full(self.y.size, np.nan)
        for fold, held in self.probabilities(scores).items():
            every[self.of_example == fold] = held
        return Crossfit(self.fold_of, every)


def _choose(means: dict[Candidate, float], distance: Callable[[Candidate], float]) -> Candidate:
    """The candidate with the best mean AUROC; among equal means, the one nearest the default (distance 0)."""
    return max(means, key=lambda candidate: (means[candidate], -distance(candidate)))


def _record(chosen: Any, means: dict[Candidate, float]) -> dict[str, Any]:
    return {"chosen": chosen, "mean_auroc": {str(candidate): mean for candidate, mean in means.items()}}


def _scores(spec: HeadSpec, fit: Callable[[HeadSpec, Examples], Any], *, blend: bool = False) -> Predict:
    """Held-out scores of the spec fitted on the rest: a lexical head's log-odds (its regression's alone, which
    trees are blended with here, unless ``blend``), another head's P(correct)."""
    def predict(train: Examples, held: Examples) -> np.ndarray:
        head = fit(spec, train)
        if isinstance(head, LexicalHead):
            linear = head.linear_log_odds(held.x, held.texts)
            if blend and head.trees is not None:
                return head.blend(linear, head.trees.log_odds(held.x, held.texts))
            return linear
        return head_scores(head, held.x, held.texts)

    return predict


def _trees(leaves: int, *, negative_weight: float | str, seed: int) -> Predict:
    def predict(train: Examples, held: Examples) -> np.ndarray:
        trees, _ = BoostedTrees.fit(train.x, train.texts, train.y, sample_weight=example_weights(negative_weight,
                                                                                                 train.y),
                                    seed=seed, leaves=leaves)
        return trees.log_odds(held.x, held.texts)

    return predict


def _regression(spec: HeadSpec, folds: _Folds, fit: Callable[[HeadSpec, Examples], Any]
                ) -> tuple[HeadSpec, dict[str, Any], dict[int, np.ndarray]]:
    """The L2 strength, then (a lexical head) ``min_df``: the spec with them, their record, and the regression's
    out-of-fold scores at them."""
    linear = dataclasses.replace(spec, model=HeadModel.LINEAR)  # the regression alone: trees come after
    by_strength = {c: folds.out_of_fold(_scores(dataclasses.replace(linear, regularisation=c), fit))
                   for c in REGULARISATION_GRID}
    default = LEXICAL_REGULARISATION if spec.recipe.lexical else REGULARISATION
    means = {c: folds.mean_auroc(scores) for c, scores in by_strength.items()}
    strength = _choose(means, lambda c: abs(math.log(c / default)))
    record = {"chosen": strength, "folds": folds.count, "mean_auroc": {str(c): mean for c, mean in means.items()}}
    spec = dataclasses.replace(spec, regularisation=strength)
    # below LEXICAL_MIN_DF_TEXTS training texts every n-gram is kept whatever min_df says
    if not spec.recipe.lexical or min(len(train.y) for train, _ in folds.splits.values()) < LEXICAL_MIN_DF_TEXTS:
        return spec, record, by_strength[strength]
    by_min_df = {m: by_strength[strength] if m == LEXICAL_MIN_DF else
                 folds.out_of_fold(_scores(dataclasses.replace(linear, regularisation=strength, min_df=m), fit))
                 for m in MIN_DF_GRID}
    means_df = {m: folds.mean_auroc(scores) for m, scores in by_min_df.items()}
    min_df = _choose(means_df, lambda m: float(m != LEXICAL_MIN_DF))
    record["min_df"] = _record(min_df, means_df)
    return dataclasses.replace(spec, min_df=min_df), record, by_min_df[min_df]


def _blend(spec: HeadSpec, folds: _Folds, linear: dict[int, np.ndarray], *, negative_weight: float | str,
           seed: int) -> tuple[HeadSpec, dict[str, Any], dict[int, np.ndarray]]:
    """The trees' leaves and share of the blend, from one tree fit per fold and leaves candidate; the blended
    out-of-fold log-odds at them."""
    trees = {leaves: folds.out_of_fold(_trees(leaves, negative_weight=negative_weight, seed=seed))
             for leaves in TREE_LEAVES_GRID}
    means = {(leaves, weight): folds.mean_auroc({fold: blended(linear[fold], held, weight)
                                                 for fold, held in trees[leaves].items()})
             for leaves in TREE_LEAVES_GRID for weight in TREE_WEIGHT_GRID}
    leaves, weight = _choose(means, lambda c: abs(c[1] - TREE_WEIGHT) + float(c[0] != TREE_LEAVES))
    record = {"chosen": {"leaves": leaves, "weight": weight},
              "mean_auroc": {str(n): {str(w): means[n, w] for w in TREE_WEIGHT_GRID} for n in TREE_LEAVES_GRID}}
    return (dataclasses.replace(spec, tree_leaves=leaves, tree_weight=weight), record,
            {fold: blended(linear[fold], held, weight) for fold, held in trees[leaves].items()})


def _mlp(spec: HeadSpec, folds: _Folds, fit: Callable[[HeadSpec, Examples], Any]
         ) -> tuple[HeadSpec, dict[str, Any], dict[int, np.ndarray]]:
    """The hidden width at the default dropout, then the dropout at that width; the out-of-fold scores at them."""
    by_width = {h: folds.out_of_fold(_scores(dataclasses.replace(spec, mlp_hidden=h), fit)) for h in MLP_HIDDEN_GRID}
    means_width = {h: folds.mean_auroc(scores) for h, scores in by_width.items()}
    width = _choose(means_width, lambda h: float(h != MLP_HIDDEN))
    by_dropout = {d: by_width[width] if d == MLP_DROPOUT else
                  folds.out_of_fold(_scores(dataclasses.replace(spec, mlp_hidden=width, mlp_dropout=d), fit))
                  for d in MLP_DROPOUT_GRID}
    means_dropout = {d: folds.mean_auroc(scores) for d, scores in by_dropout.items()}
    dropout = _choose(means_dropout, lambda d: float(d != MLP_DROPOUT))
    return (dataclasses.replace(spec, mlp_hidden=width, mlp_dropout=dropout),
            {"folds": folds.count, "mlp_hidden": _record(width, means_width),
             "mlp_dropout": _record(dropout, means_dropout)}, by_dropout[dropout])


def choose_settings(spec: HeadSpec, examples: Examples, *, negative_weight: float | str, iterations: int | None,
                    seed: int) -> Tuned:
    """The spec with each chosen setting; how each was chosen (its candidates' mean AUROCs): ``chosen``,
    ``folds`` and ``mean_auroc`` are the L2 strength's, ``min_df`` and ``trees`` (leaves and share) the lexical
    head's, ``mlp_hidden`` and ``mlp_dropout`` the MLP's; and the out-of-fold scores at them. Nothing is chosen
    with fewer than two problems or no fold that scores. ``examples``: the training problems' alone."""
    fold_of = problem_folds(list(examples.groups), TUNING_FOLDS, seed)
    if fold_of is None:
        return Tuned(spec, None, None)
    folds = _Folds(examples, fold_of, log_odds=spec.recipe.lexical)
    if not folds.splits:
        return Tuned(spec, None, None)

    def fit(tried: HeadSpec, train: Examples) -> Any:
        return fit_head(tried, train, negative_weight=negative_weight, iterations=iterations, seed=seed)[0]

    if not folds.scored:  # no held-out fold holds both labels: nothing to choose by
        return Tuned(spec, None, folds.crossfit(folds.out_of_fold(_scores(spec, fit, blend=True))))
    if spec.model is HeadModel.MLP:
        spec, record, chosen = _mlp(spec, folds, fit)
        return Tuned(spec, record, folds.crossfit(chosen))
    spec, record, chosen = _regression(spec, folds, fit)
    if spec.model is HeadModel.LINEAR_TREES:
        spec, record["trees"], chosen = _blend(spec, folds, chosen, negative_weight=negative_weight, seed=seed)
    return Tuned(spec, record, folds.crossfit(chosen))

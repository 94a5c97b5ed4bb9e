"""Fitting a head to its examples, and scoring rows with one (each distinct step once)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..data import IGNORE_INDEX, PrmRow, prefix_digests
from .features import Examples
from .lexical import LEXICAL_MIN_DF, LEXICAL_REGULARISATION, TREE_LEAVES, TREE_WEIGHT, LexicalHead
from .models import DEFAULT_ITERATIONS, MLP_DROPOUT, MLP_HIDDEN, MLP_MAX_EPOCHS, REGULARISATION, LinearHead, MlpHead
from .persistence import Head
from .spec import HeadModel, HeadSpec


def fit_head(spec: HeadSpec, examples: Examples, *, negative_weight: float | str, iterations: int | None,
             seed: int) -> tuple[Head, dict[str, Any]]:
    """The spec's classifier fitted with its settings (a setting it leaves None: the model's default; a lexical
    recipe's is always ``LexicalHead``, with boosted trees for ``linear+trees`` unless their share is 0);
    ``iterations``: the optimizer's (linear, lexical) or the most epochs (MLP)."""
    x, y = examples.x, examples.y
    if spec.recipe.lexical:
        tree_weight = TREE_WEIGHT if spec.tree_weight is None else spec.tree_weight
        return LexicalHead.fit(x, examples.texts, y, contexts=examples.contexts, negative_weight=negative_weight,
                               iterations=iterations or DEFAULT_ITERATIONS, seed=seed, recipe=spec.recipe,
                               trees=spec.model is HeadModel.LINEAR_TREES and tree_weight > 0,
                               regularisation=spec.regularisation or LEXICAL_REGULARISATION,
                               min_df=spec.min_df or LEXICAL_MIN_DF, tree_weight=tree_weight,
                               tree_leaves=spec.tree_leaves or TREE_LEAVES)
    if spec.model is HeadModel.MLP:
        return MlpHead.fit(x, y, examples.groups, negative_weight=negative_weight,
                           iterations=iterations or MLP_MAX_EPOCHS, seed=seed, hidden=spec.mlp_hidden or MLP_HIDDEN,
                           dropout=MLP_DROPOUT if spec.mlp_dropout is None else spec.mlp_dropout)
    return LinearHead.fit(x, y, negative_weight=negative_weight, iterations=iterations or DEFAULT_ITERATIONS,
                          seed=seed, regularisation=spec.regularisation or REGULARISATION)


def head_scores(head: Head, x: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """P(correct) of each row; ``texts``: each row's step (PRM) or solution (ORM), which a lexical head reads."""
    return head.predict(x, texts) if isinstance(head, LexicalHead) else head.predict(x)


def distinct_steps(items: Sequence[tuple[str, Sequence[str]]]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Each distinct step in its context (its problem and the steps before it) once: the (item, step) where it
    first occurs, and for each item the distinct step each of its steps is. A step's columns and score depend on
    that context only, and an ``alternatives`` export repeats every chosen prefix in each alternative's row after
    it, so each is scored once, in one call (a lexical head's vectorizer is also slow called row by row)."""
    keys: dict[str, int] = {}
    picks: list[tuple[int, int]] = []
    where: list[list[int]] = []
    for item, (prompt, steps) in enumerate(items):
        positions = []
        for step, digest in enumerate(prefix_digests(prompt, steps)[1:]):  # entry i: the steps up to step i
            if digest not in keys:
                keys[digest] = len(picks)
                picks.append((item, step))
            positions.append(keys[digest])
        where.append(positions)
    return picks, where


def step_scores_of(head: Head, items: Sequence[tuple[str, Sequence[str]]],
                   features_of: Callable[[int], np.ndarray]) -> list[np.ndarray]:
    """Each item's step scores, each distinct step scored once (``distinct_steps``) in one call;
    ``features_of(i)``: item i's ``step_features``, asked only of the items that hold a step first."""
    picks, where = distinct_steps(items)
    if not picks:
        return [np.zeros(0) for _ in items]
    features = {item: features_of(item) for item in dict.fromkeys(item for item, _ in picks)}
    distinct = head_scores(head, np.stack([features[item][step] for item, step in picks]),
                           [items[item][1][step] for item, step in picks])
    return [distinct[positions] for positions in where]


def labeled(scores: np.ndarray, row: PrmRow) -> tuple[list[float], list[int]]:
    """The scores and labels of a row's labeled steps, from the scores of all its steps."""
    pairs = [(float(s), int(lab)) for s, lab in zip(scores, row.labels, strict=True) if lab != IGNORE_INDEX]
    return [s for s, _ in pairs], [lab for _, lab in pairs]

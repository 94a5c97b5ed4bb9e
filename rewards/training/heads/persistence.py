"""A head on disk: plain arrays in ``head.npz`` (no pickle) and, beside a lexical head's, its trees in LightGBM's
own text format. ``head_format`` in the arrays says how to read them; a head saved before it (format 1) still loads:
its kind is told by its arrays, and a lexical head lacking ``tokens`` or ``features`` was saved before those
existed (the legacy token pattern without text marks; the ``lexical+cosines`` recipe)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .features import LEGACY_TEXT_FEATURES, TEXT_FEATURES
from .lexical import LEGACY_LEXICAL_TOKENS, TREE_WEIGHT, BoostedTrees, LexicalHead
from .models import LinearHead, MlpHead
from .spec import Recipe

HEAD_FILE = "head.npz"
TREES_FILE = "trees.txt"
HEAD_FORMAT = 3  # 3: a lexical head's trees' share of the blend is saved (it is chosen per job)

Head = LinearHead | MlpHead | LexicalHead


def _arrays(head: Head) -> dict[str, Any]:
    if isinstance(head, LexicalHead):
        arrays: dict[str, Any] = {
            "mean": head.mean, "scale": head.scale, "coef": head.coef, "vocabulary": head.vocabulary,
            "idf": head.idf, "word_coef": head.word_coef, "intercept": np.array([head.intercept]),
            "tokens": np.array(head.tokens), "marks": np.array(head.marks), "features": np.array(head.recipe.value),
            "text_features": np.array(TEXT_FEATURES)}  # a head is saved right after its fit
        if head.trees is not None:
            arrays["tree_vocabulary"] = head.trees.vocabulary
            arrays["tree_weight"] = np.array(head.tree_weight)
        return arrays
    if isinstance(head, MlpHead):
        return {"mean": head.mean, "scale": head.scale, "hidden_weight": head.hidden_weight,
                "hidden_bias": head.hidden_bias, "coef": head.coef, "intercept": np.array([head.intercept])}
    return {"mean": head.mean, "scale": head.scale, "coef": head.coef, "intercept": np.array([head.intercept])}


def save_head(head: Head, folder: Path) -> None:
    np.savez(folder / HEAD_FILE, head_format=np.array(HEAD_FORMAT), **_arrays(head))
    if isinstance(head, LexicalHead) and head.trees is not None:
        (folder / TREES_FILE).write_text(head.trees.booster.model_to_string(), encoding="utf-8")


def _trees(folder: Path, data: Any) -> BoostedTrees | None:
    if "tree_vocabulary" not in data:
        return None
    import lightgbm

    booster = lightgbm.Booster(model_str=(folder / TREES_FILE).read_text(encoding="utf-8"))
    return BoostedTrees(booster, data["tree_vocabulary"])


def _lexical(folder: Path, data: Any) -> LexicalHead:
    current = "tokens" in data
    return LexicalHead(data["mean"], data["scale"], data["coef"], data["vocabulary"], data["idf"],
                       data["word_coef"], float(data["intercept"][0]),
                       tokens=str(data["tokens"]) if current else LEGACY_LEXICAL_TOKENS,
                       marks=bool(data["marks"]) if current else False,
                       recipe=Recipe(str(data["features"])) if "features" in data else Recipe.LEXICAL_COSINES,
                       trees=_trees(folder, data),
                       tree_weight=float(data["tree_weight"]) if "tree_weight" in data else TREE_WEIGHT)


def text_features_of(folder: Path) -> int:
    """The text-feature set a saved lexical head was fitted on (``features.TEXT_FEATURES``; a head saved before
    the sets were numbered: set 1)."""
    with np.load(folder / HEAD_FILE, allow_pickle=False) as data:
        return int(data["text_features"]) if "text_features" in data else LEGACY_TEXT_FEATURES


def load_head(folder: Path) -> Head:
    """The saved head: linear, MLP (its arrays hold a hidden layer) or lexical (a vocabulary)."""
    with np.load(folder / HEAD_FILE, allow_pickle=False) as data:
        version = int(data["head_format"]) if "head_format" in data else 1
        if version > HEAD_FORMAT:
            raise ValueError(f"{folder / HEAD_FILE}: head format {version} is newer than this code reads "
                             f"({HEAD_FORMAT})")
        if "vocabulary" in data:
            return _lexical(folder, data)
        if "hidden_weight" in data:
            return MlpHead(data["mean"], data["scale"], data["hidden_weight"], data["hidden_bias"], data["coef"],
                           float(data["intercept"][0]))
        return LinearHead(data["mean"], data["scale"], data["coef"], float(data["intercept"][0]))

"""Scoring with a saved head."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import default_model_path
from ..features import FeatureCache
from .features import solution_features, step_features
from .fit import head_scores, step_scores_of
from .lexical import LexicalHead
from .persistence import load_head, text_features_of
from .spec import Recipe

if TYPE_CHECKING:
    from ..modeling import ModelSpec


def backbone_folder(base_model: str | None) -> Path:
    return default_model_path() if base_model in (None, "default") else Path(str(base_model))


class HeadScorer:
    """Scores with a saved head: a recipe that reads vectors takes them from the shared cache (texts it lacks are
    encoded and added); ``lexical`` encodes nothing."""

    def __init__(self, folder: Path, spec: ModelSpec, *, cache_root: Path | None = None) -> None:
        self.spec = spec
        self.head = load_head(folder)
        # a lexical head knows its own recipe (one saved before the marker read the backbone's cosines)
        self.recipe = self.head.recipe if isinstance(self.head, LexicalHead) else Recipe(spec.features or "context")
        self.text_features = text_features_of(folder)  # the columns it was fitted on
        self.cache: FeatureCache | None = None
        if self.recipe.reads_vectors:
            root = cache_root or (Path(spec.feature_cache) if spec.feature_cache else folder / "features")
            self.cache = FeatureCache(root, backbone_folder(spec.base_model), spec.max_length)

    def _ensure(self, items: Sequence[tuple[str, Sequence[str]]]) -> None:
        if self.cache is not None:
            self.cache.ensure([t for prompt, steps in items for t in (prompt, *steps)])

    def steps(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        self._ensure(items)
        scores = step_scores_of(self.head, items,
                                lambda n: step_features(self.cache, items[n][0], items[n][1], self.recipe,
                                                          text_features=self.text_features))
        return [[float(p) for p in row] for row in scores]

    def solutions(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
        self._ensure(items)
        x = np.stack([solution_features(self.cache, prompt, steps, self.recipe, text_features=self.text_features)
                      for prompt, steps in items])
        return [float(p) for p in head_scores(self.head, x, ["\n".join(steps) for _, steps in items])]

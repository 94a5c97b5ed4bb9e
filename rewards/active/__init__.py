"""Active learning without Django: choose the next generation of solutions to label from a scored pool.

``make_strategy("convincing_wrong", {"max_per_problem": 2}).select(pool, 64)`` returns the chosen
candidates with the reason each was picked; the web side turns them into labeling work.
"""
from __future__ import annotations

from .strategies import (
    STRATEGIES,
    ConvincingWrongStrategy,
    MixedStrategy,
    RandomStrategy,
    ScoredCandidate,
    Selection,
    SelectionError,
    Strategy,
    StrategyConfigError,
    UncertainStrategy,
    make_strategy,
)

__all__ = [
    "STRATEGIES", "ScoredCandidate", "ConvincingWrongStrategy", "MixedStrategy", "RandomStrategy", "Selection",
    "SelectionError", "Strategy", "StrategyConfigError", "UncertainStrategy", "make_strategy",
]

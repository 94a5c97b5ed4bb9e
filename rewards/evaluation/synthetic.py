"""Synthetic best-of-N pools for tests and the benchmark (no real model involved).

Per problem: a solve rate drawn from Beta(0.7, 0.7); a pool of ``pool_size`` samples of which up to
``max_dropped`` are missing (the released file drops samples that reached no answer within 1024 tokens,
so problems have fewer samples than the pool), plus a few samples that reached no answer; the correct
answer is one string, wrong answers come from a small per-problem set (2 to 30 strings, Zipf-like);
PRM and ORM scores are logistic in correctness plus noise (PRM better separated), rounded to 4 decimals
so that some scores tie.
"""
from __future__ import annotations

import numpy as np

from .pools import Pool

__all__ = ["synthetic_pools"]


def synthetic_pools(
    problems: int = 500,
    pool_size: int = 1860,
    seed: int = 0,
    max_dropped: int | None = None,
    no_answer_rate: float = 0.02,
) -> list[Pool]:
    rng = np.random.default_rng(seed)
    max_dropped = pool_size // 10 if max_dropped is None else max_dropped
    pools = []
    for i in range(problems):
        k = pool_size - int(rng.integers(0, max_dropped + 1))
        solve = rng.beta(0.7, 0.7)
        correct = rng.random(k) < solve
        n_wrong = int(rng.integers(2, 31))
        weights = 1.0 / np.arange(1, n_wrong + 1) ** 1.2
        wrong = rng.choice(n_wrong, size=k, p=weights / weights.sum())
        answers = np.where(correct, "A", np.char.add("W", wrong.astype(str))).astype(object)
        none = rng.random(k) < no_answer_rate
        answers[none] = None
        correct &= ~none
        difficulty = rng.normal(0, 1)
        prm = 1 / (1 + np.exp(-(2.2 * correct - 1.1 + difficulty + rng.normal(0, 1.2, k))))
        orm = 1 / (1 + np.exp(-(1.4 * correct - 0.7 + difficulty + rng.normal(0, 1.2, k))))
        pools.append(Pool.from_arrays(list(answers), correct, np.round(prm, 4), np.round(orm, 4),
                                      problem=f"synthetic-{i}"))
    return pools

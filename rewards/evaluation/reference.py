"""Pure-Python reference: the paper's trial loop written out plainly, plus exhaustive enumeration.

``reference_trials`` follows ``prm800k/eval/eval.py`` step by step: for every trial, every N and every
problem, pad the samples with ``None`` up to the pool size, ``random.shuffle``, keep the first N, drop
empty slots and samples without an answer, then choose. The script evaluates one method per run; here
the four methods share each (trial, N, problem) subset, which leaves each method's distribution as is.
Missing scores rank lowest (``-inf``), Steplab's extension.

``enumerate_expected`` averages over *all* N-subsets of the padded pool (``itertools.combinations``)
with exact rational arithmetic, resolving ties by their probability under the script's rule: the exact
expectation the Monte-Carlo estimators converge to, for tiny pools.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from fractions import Fraction
from itertools import combinations
from typing import TYPE_CHECKING, TypedDict

from .pools import Pool

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12 on

__all__ = ["enumerate_expected", "reference_best_of_n", "reference_trials"]

METHODS = ("prm", "orm", "majority", "pass")


def _samples(pool: Pool) -> list[dict]:
    out = []
    for a, c, p, o in zip(pool.answers, pool.is_correct.tolist(), pool.prm_score.tolist(), pool.orm_score.tolist(),
                          strict=True):
        out.append({
            "answer": a,
            "is_correct": bool(c),
            "prm_score": p if math.isfinite(p) else -math.inf,
            "orm_score": o if math.isfinite(o) else -math.inf,
        })
    return out


def _verdicts(pool: Pool) -> dict[str, bool]:
    return pool.answer_correctness()


def _choose(subset: list[dict], method: str, verdict: dict[str, bool]) -> bool:
    if method == "pass":
        return any(s["is_correct"] for s in subset)
    if not subset:
        return False
    if method == "majority":
        answer, _ = Counter(s["answer"] for s in subset).most_common(1)[0]  # first seen wins a tie
        return verdict[answer]
    key = "prm_score" if method == "prm" else "orm_score"
    return max(subset, key=lambda s: s[key])["is_correct"]  # first maximal one wins a tie


def reference_trials(
    pools: Sequence[Pool],
    ns: Iterable[int],
    trials: int = 400,
    seed: int | None = 0,
    pool_size: int | None = None,
    methods: Sequence[str] = METHODS,
) -> dict[str, list[list[float]]]:
    """{method: [[accuracy for each N] for each trial]} with Python's ``random``."""
    ns = list(ns)
    pool_size = max(len(p) for p in pools) if pool_size is None else pool_size
    rng = random.Random(seed)
    data = [(_samples(p), _verdicts(p)) for p in pools]
    out: dict[str, list[list[float]]] = {m: [] for m in methods}
    for _ in range(trials):
        rates: dict[str, list[float]] = {m: [] for m in methods}
        for n in ns:
            wins = dict.fromkeys(methods, 0)
            for samples, verdict in data:
                padded = samples + [None] * (pool_size - len(samples))
                rng.shuffle(padded)
                subset = [s for s in padded[:n] if s is not None and s["answer"] is not None]
                for m in methods:
                    wins[m] += _choose(subset, m, verdict)
            for m in methods:
                rates[m].append(wins[m] / len(data))
        for m in methods:
            out[m].append(rates[m])
    return out


class TrialOptions(TypedDict, total=False):
    """``reference_trials``' keyword options, which ``reference_best_of_n`` passes on."""

    trials: int
    seed: int | None
    pool_size: int | None
    methods: Sequence[str]


def reference_best_of_n(pools: Sequence[Pool], ns: Iterable[int],
                        **options: Unpack[TrialOptions]) -> dict[str, dict[str, dict[str, float]]]:
    """{method: {"N": {"mean", "std"}}} (population std, like ``np.std``) over ``reference_trials``."""
    ns = list(ns)
    per = reference_trials(pools, ns, **options)
    result: dict[str, dict[str, dict[str, float]]] = {}
    for m, rows in per.items():
        result[m] = {}
        for j, n in enumerate(ns):
            col = [r[j] for r in rows]
            mean = sum(col) / len(col)
            result[m][str(n)] = {"mean": mean, "std": math.sqrt(sum((x - mean) ** 2 for x in col) / len(col))}
    return result


def _expected_choice(subset: list[dict], method: str, verdict: dict[str, bool]) -> Fraction:
    if method == "pass":
        return Fraction(int(any(s["is_correct"] for s in subset)))
    if not subset:
        return Fraction(0)
    if method == "majority":
        counts = Counter(s["answer"] for s in subset)
        top = max(counts.values())
        tied = [a for a, k in counts.items() if k == top]
        return Fraction(sum(verdict[a] for a in tied), len(tied))
    key = "prm_score" if method == "prm" else "orm_score"
    top = max(s[key] for s in subset)
    tied = [s for s in subset if s[key] == top]
    return Fraction(sum(s["is_correct"] for s in tied), len(tied))


def enumerate_expected(pool: Pool, n: int, method: str, pool_size: int | None = None) -> Fraction:
    """Exact E[correct] of ``method`` for one problem over all N-subsets of the padded pool."""
    pool_size = len(pool) if pool_size is None else pool_size
    samples = _samples(pool) + [None] * (pool_size - len(pool))
    verdict = _verdicts(pool)
    total, count = Fraction(0), 0
    for combo in combinations(range(pool_size), n):
        subset = [s for s in (samples[i] for i in combo) if s is not None and s["answer"] is not None]
        total += _expected_choice(subset, method, verdict)
        count += 1
    return total / count

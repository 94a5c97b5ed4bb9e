"""Vectorised best-of-N estimator (Monte Carlo, the paper's protocol) and its closed forms.

Protocol (OpenAI's ``prm800k/eval/eval.py``, read from ``openai/prm800k``): every problem's samples are
padded with empty slots up to the pool size (1860 in the paper), shuffled, and the first N are the
subset; empty slots and samples without an answer are then dropped; the top-scored remaining sample is
chosen (Python ``max``: the first maximal one in shuffled order, i.e. a uniformly random one among tied
top scores); a problem counts when the choice exists and is correct. The per-trial accuracy is the mean
over problems, and mean and (population, ``np.std``) std are taken over ``trials`` trials (400).

Methods (names fixed): ``prm`` / ``orm`` (top ``prm_score`` / ``orm_score`` in the subset), ``majority``
(most frequent answer string among the subset's samples with an answer; ties between answers broken
uniformly at random, which is what ``Counter.most_common`` on the shuffled subset does; correct when
that answer is correct), ``pass`` (any correct sample in the subset).

Vectorisation. Per trial and problem one uniformly random permutation of the padded pool is drawn (a
sort of 64-bit random keys whose low bits carry the slot index, i.e. ``64 - ceil(log2 pool)`` random
bits: the chance of a tie is ~1e-10 per row) and the subset for N is its first N slots, for every N in
the trial. eval.py reshuffles for each N; sharing one permutation across the Ns of a trial correlates
the Ns with each other but leaves each N's distribution, hence its mean and std over trials, unchanged.
Top score with the first-position tie rule is a running max of ``(rank, -position, correct)`` packed in
one integer. Majority counts answers with one ``bincount`` over (answer id, N bucket) followed by a
cumulative sum over buckets; a tie between a correct and a wrong answer is settled by a uniform draw
with probability (#tied correct answers)/(#tied answers), the law of the script's tie rule. Trials are
processed in chunks bounded by ``chunk_elements``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .intervals import DRAWS, PAIRS, best_of_n_intervals
from .pools import Pool

__all__ = [
    "METHODS",
    "PAPER_NS",
    "best_of_n",
    "default_ns",
    "encode_pools",
    "exact_best_of_n",
    "simulate_trials",
]

METHODS = ("prm", "orm", "majority", "pass")
SCORE_METHODS = ("prm", "orm")
#: the Ns of eval.py (Figure 3 of the paper)
PAPER_NS = (10, 25, 50, 75, 100, 200, 300, 400, 500, 750, 1000, 1250, 1500, 1860)


def default_ns(pool_size: int) -> list[int]:
    """1, 2, 4, ... up to the pool size, plus the pool size itself."""
    ns, n = [], 1
    while n <= pool_size:
        ns.append(n)
        n *= 2
    if not ns or ns[-1] != pool_size:
        ns.append(pool_size)
    return ns


@dataclass
class Encoded:
    """Pools padded to ``pool_size`` as (P, n) arrays (padding and no-answer samples are ineligible)."""

    pool_size: int
    correct: np.ndarray  # bool (P, n): reached an answer and is correct
    eligible: np.ndarray  # bool (P, n): reached an answer
    rank: dict[str, np.ndarray]  # int32 (P, n): 0 ineligible, 1 eligible without score, 2.. dense score rank
    has_scores: dict[str, bool]  # any sample at all carries this score
    answer: np.ndarray  # int32 (P, n): local answer id, -1 for none; layout [wrong.., dummy, correct.., dummy]
    n_wrong: np.ndarray  # (P,) distinct wrong answers
    n_right: np.ndarray  # (P,) distinct correct answers

    @property
    def problems(self) -> int:
        return self.correct.shape[0]


def _check_pool_size(pools: Sequence[Pool], pool_size: int | None) -> int:
    largest = max((len(p) for p in pools), default=0)
    if pool_size is None:
        pool_size = largest
    pool_size = int(pool_size)
    if pool_size < 1:
        raise ValueError("pool_size must be at least 1 (and the pools cannot all be empty)")
    if largest > pool_size:
        bad = next(p for p in pools if len(p) > pool_size)
        raise ValueError(f"problem {bad.problem!r:.60} has {len(bad)} samples, more than pool_size={pool_size}")
    return pool_size


def encode_pools(pools: Sequence[Pool], pool_size: int | None = None) -> Encoded:
    if not pools:
        raise ValueError("no problems")
    n = _check_pool_size(pools, pool_size)
    P = len(pools)
    correct = np.zeros((P, n), dtype=bool)
    eligible = np.zeros((P, n), dtype=bool)
    rank = {m: np.zeros((P, n), dtype=np.int32) for m in SCORE_METHODS}
    has_scores = {m: False for m in SCORE_METHODS}
    answer = np.full((P, n), -1, dtype=np.int32)
    n_wrong = np.zeros(P, dtype=np.int64)
    n_right = np.zeros(P, dtype=np.int64)
    for i, pool in enumerate(pools):
        k = len(pool)
        if k == 0:
            continue
        elig = pool.has_answer
        eligible[i, :k] = elig
        correct[i, :k] = pool.is_correct & elig
        for m in SCORE_METHODS:
            s = pool.prm_score if m == "prm" else pool.orm_score
            finite = np.isfinite(s)
            has_scores[m] |= bool(finite.any())
            r = np.where(elig, 1, 0).astype(np.int32)
            scored = elig & finite
            if scored.any():
                _, inv = np.unique(s[scored], return_inverse=True)
                r[scored] = inv.astype(np.int32) + 2
            rank[m][i, :k] = r
        verdict = pool.answer_correctness()
        wrong = [a for a, ok in verdict.items() if not ok]
        right = [a for a, ok in verdict.items() if ok]
        ids = {a: j for j, a in enumerate(wrong)}
        ids.update({a: len(wrong) + 1 + j for j, a in enumerate(right)})
        answer[i, :k] = [(-1 if a is None else ids[a]) for a in pool.answers]
        n_wrong[i], n_right[i] = len(wrong), len(right)
    return Encoded(n, correct, eligible, rank, has_scores, answer, n_wrong, n_right)


def _check_ns(ns: Iterable[int] | None, pool_size: int) -> list[int]:
    if ns is None:
        return default_ns(pool_size)
    out = sorted({int(v) for v in ns})
    if not out:
        raise ValueError("ns is empty")
    if out[0] < 1 or out[-1] > pool_size:
        raise ValueError(f"every N must be in [1, pool_size={pool_size}], got {out}")
    return out


def simulate_trials(
    pools: Sequence[Pool] | Encoded,
    ns: Iterable[int] | None = None,
    trials: int = 400,
    seed: int | None = 0,
    pool_size: int | None = None,
    methods: Sequence[str] = METHODS,
    chunk_elements: int = 2_000_000,
) -> tuple[list[int], dict[str, np.ndarray]]:
    """Monte-Carlo trials: returns (ns, {method: array (trials, len(ns)) of per-trial accuracy})."""
    enc = pools if isinstance(pools, Encoded) else encode_pools(pools, pool_size)
    ns, wins = _simulate_wins(enc, ns, trials, seed, methods, chunk_elements)
    return ns, {m: w / enc.problems for m, w in wins.items()}


def _check_run(methods: Sequence[str], trials: int) -> int:
    """``trials`` as an int, once the methods are known ones and there is at least one trial."""
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; known: {METHODS}")
    trials = int(trials)
    if trials < 1:
        raise ValueError("trials must be at least 1")
    return trials


def _slot_bits(pool_size: int) -> int:
    """Bits that hold a slot index (the low bits of a permutation key)."""
    return max(1, (pool_size - 1).bit_length())


def _shuffled_slots(rng: np.random.Generator, rows: int, pool_size: int, nmax: int) -> np.ndarray:
    """Per row, the first ``nmax`` slots of a uniformly random permutation of the pool's slots, int64 (rows, nmax):
    random 64-bit keys whose low bits carry the slot index, sorted."""
    low = np.uint64((1 << _slot_bits(pool_size)) - 1)
    keys = rng.bit_generator.random_raw(rows * pool_size).reshape(rows, pool_size)
    keys &= ~low
    keys |= np.arange(pool_size, dtype=np.uint64)
    keys.sort(axis=1)
    take = keys[:, :nmax] & low
    del keys
    return take.view(np.int64)


def _top_score_payloads(enc: Encoded, methods: Sequence[str],
                        nmax: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per score method, each sample's ``(rank << (ib + 1)) | correct`` flat over (P, n); and per subset position
    its reversed position shifted by one, OR-ed in per trial so that the earlier slot wins ties."""
    n, ib = enc.pool_size, _slot_bits(enc.pool_size)
    ptype = np.int32 if (n + 1).bit_length() + ib + 1 <= 31 else np.int64
    rev_pos = ((n - 1 - np.arange(nmax, dtype=np.int64)) << 1).astype(ptype)
    flat_packed = {
        m: ((enc.rank[m].astype(np.int64) << (ib + 1)) | enc.correct).reshape(-1).astype(ptype)
        for m in SCORE_METHODS if m in methods
    }
    return rev_pos, flat_packed


@dataclass(frozen=True)
class _MajorityLayout:
    """Answer rows laid out per trial as [trash, p0 wrong.., p0 dummy, p0 right.., p0 dummy, p1 ..]; a sample's
    count key is (row * J + bucket); samples without an answer go to the trial's trash row."""

    rows: int  # answer rows per trial
    key: np.ndarray  # flat (P * n,): each slot's row * J
    blk_starts: np.ndarray  # first row of each block (trash, then each problem's wrong and right answers)
    blk_len: np.ndarray  # rows in each block


def _majority_rows(enc: Encoded) -> int:
    return 1 + int((enc.n_wrong + 1 + enc.n_right + 1).sum())


def _majority_layout(enc: Encoded, J: int, chunk: int) -> _MajorityLayout:
    seg_w = enc.n_wrong + 1
    seg_r = enc.n_right + 1
    k_off = 1 + np.concatenate([[0], np.cumsum(seg_w + seg_r)[:-1]])
    k_blk = _majority_rows(enc)
    ans = enc.answer.astype(np.int64)
    static = np.where(ans >= 0, ans + k_off[:, None], 0)
    mtype = np.int32 if chunk * k_blk * J < 2**31 else np.int64
    return _MajorityLayout(
        rows=k_blk, key=(static * J).reshape(-1).astype(mtype),
        blk_starts=np.concatenate([[0], np.stack([k_off, k_off + seg_w], axis=1).reshape(-1)]),
        blk_len=np.concatenate([[1], np.stack([seg_w, seg_r], axis=1).reshape(-1)]))


def _simulate_wins(enc: Encoded, ns, trials, seed, methods, chunk_elements,
                   per_problem: dict[str, np.ndarray] | None = None) -> tuple[list[int], dict[str, np.ndarray]]:
    """Per-trial numbers of problems solved, int64 (trials, len(ns)) per method; with ``per_problem``, each
    problem's wins summed over the trials are added to it too ((problems, len(ns)) per method)."""
    n, P = enc.pool_size, enc.problems
    ns = _check_ns(ns, n)
    trials = _check_run(methods, trials)
    rng = np.random.default_rng(seed)
    J = len(ns)
    ns_a = np.asarray(ns, dtype=np.int64)
    nmax = int(ns_a[-1])
    starts = np.concatenate([[0], ns_a[:-1]])  # prefix segments [starts[j], ns[j]) of the first nmax slots
    bucket = np.repeat(np.arange(J, dtype=np.int64), np.diff(np.concatenate([[0], ns_a])))  # (nmax,)
    # Static per-sample payloads, gathered once per trial through the permutation.
    rev_pos, flat_packed = _top_score_payloads(enc, methods, nmax)
    flat_correct = enc.correct.reshape(-1)
    voting = "majority" in methods
    per_trial = max(P * n, _majority_rows(enc) * J if voting else 0)
    chunk = max(1, min(trials, int(chunk_elements) // max(1, per_trial)))
    majority = _majority_layout(enc, J, chunk) if voting else None

    out = {m: np.empty((trials, J), dtype=np.int64) for m in methods}
    cache: dict[int, tuple] = {}
    for t0 in range(0, trials, chunk):
        b = min(chunk, trials - t0)
        if b not in cache:
            prob_of_row = np.tile(np.arange(P, dtype=np.int64), b)
            cache[b] = (
                (prob_of_row * n)[:, None],
                (np.repeat(np.arange(b, dtype=np.int64) * majority.rows * J, P)[:, None] + bucket).astype(
                    majority.key.dtype) if majority is not None else None,
            )
        row_base, trial_bucket = cache[b]
        take = _shuffled_slots(rng, b * P, n, nmax)
        take += row_base
        for m in methods:
            if m in SCORE_METHODS:
                packed = flat_packed[m].take(take)
                packed |= rev_pos
                best = np.maximum.accumulate(np.maximum.reduceat(packed, starts, axis=1), axis=1)
                del packed
                win = (best & 1).astype(bool)
            elif m == "pass":
                corr = flat_correct.take(take)
                win = np.logical_or.accumulate(np.logical_or.reduceat(corr, starts, axis=1), axis=1)
            else:
                assert majority is not None  # "majority" is in methods
                key = majority.key.take(take)
                key += trial_bucket
                win = _majority_counts(key, b, P, J, majority.rows, majority.blk_starts, majority.blk_len, rng)
            out[m][t0:t0 + b] = win.reshape(b, P, J).sum(axis=1)
            if per_problem is not None:
                per_problem.setdefault(m, np.zeros((P, J), dtype=np.int64))
                per_problem[m] += win.reshape(b, P, J).sum(axis=0)
    return ns, out


def _majority_counts(key, b, P, J, k_blk, blk_starts, blk_len, rng) -> np.ndarray:
    """Per row and N: does the most frequent answer (uniform among tied answers) carry a right answer?"""
    counts = np.bincount(key.ravel(), minlength=b * k_blk * J).reshape(b * k_blk, J)
    np.cumsum(counts, axis=1, out=counts)  # counts[answer, j]: occurrences among the first ns[j] slots
    seg_starts = (blk_starts[None, :] + (np.arange(b) * k_blk)[:, None]).reshape(-1)
    best = np.maximum.reduceat(counts, seg_starts, axis=0).reshape(b, 1 + 2 * P, J)
    m_wrong = best[:, 1::2].reshape(b * P, J)
    m_right = best[:, 2::2].reshape(b * P, J)
    tie = (m_wrong == m_right) & (m_right > 0)
    u = rng.random((b * P, J))
    win = m_right > m_wrong
    if tie.any():
        top = np.maximum(m_wrong, m_right).reshape(b, P, J)
        seg_top = np.concatenate([np.zeros((b, 1, J), dtype=top.dtype), np.repeat(top, 2, axis=1)], axis=1)
        at_top = counts == np.repeat(seg_top.reshape(-1, J), np.tile(blk_len, b), axis=0)
        n_top = np.add.reduceat(at_top, seg_starts, axis=0).reshape(b, 1 + 2 * P, J)
        t_wrong = n_top[:, 1::2].reshape(b * P, J)
        t_right = n_top[:, 2::2].reshape(b * P, J)
        win |= tie & (u * (t_wrong + t_right) < t_right)
    return win


def _exclusion_table(n: int, ns: Sequence[int]) -> np.ndarray:
    """H[j, a] = C(n - a, N_j) / C(n, N_j): chance that a given set of a slots misses a random N_j-subset."""
    i = np.arange(n, dtype=float)
    table = np.ones((len(ns), n + 1))
    for j, N in enumerate(ns):
        table[j, 1:] = np.cumprod(np.maximum(n - N - i, 0.0) / (n - i))
    return table


def exact_best_of_n(
    pools: Sequence[Pool] | Encoded,
    ns: Iterable[int] | None = None,
    pool_size: int | None = None,
) -> dict[str, dict[str, float] | None]:
    """Closed-form expectations (no sampling) for ``pass``, ``prm`` and ``orm``.

    pass@N = 1 - C(n-c, N)/C(n, N) per problem (c = correct samples with an answer, n = pool size).
    Top score: with the eligible samples grouped by tied score, group g (m_g samples, c_g correct, E_g
    eligible samples scored strictly higher) holds the subset's best with probability
    [C(n-E_g, N) - C(n-E_g-m_g, N)]/C(n, N), and the chosen member is uniform among the group's members
    in the subset, so it is correct with probability c_g/m_g (the script's tie rule). Samples with a
    missing score form the lowest group. Majority voting has no simple closed form and is omitted.
    Values are means over problems; a method whose score is absent from every sample is None.
    """
    enc = pools if isinstance(pools, Encoded) else encode_pools(pools, pool_size)
    n = enc.pool_size
    ns = _check_ns(ns, n)
    H = _exclusion_table(n, ns)
    c = enc.correct.sum(axis=1)
    result: dict[str, dict[str, float] | None] = {"pass": _as_dict(ns, (1.0 - H[:, c]).mean(axis=1))}
    for m in SCORE_METHODS:
        if not enc.has_scores[m]:
            result[m] = None
            continue
        total = np.zeros(len(ns))
        for i in range(enc.problems):
            r = enc.rank[m][i]
            keep = r > 0
            if not keep.any():
                continue
            ranks, inv, size = np.unique(-r[keep], return_inverse=True, return_counts=True)  # best first
            right = np.bincount(inv, weights=enc.correct[i][keep], minlength=len(ranks))
            above = np.concatenate([[0], np.cumsum(size)[:-1]])
            p_best = H[:, above] - H[:, above + size]
            total += p_best @ (right / size)
        result[m] = _as_dict(ns, total / enc.problems)
    return result


def _as_dict(ns: Sequence[int], values: np.ndarray) -> dict[str, float]:
    return {str(N): float(v) for N, v in zip(ns, values, strict=True)}


def summarize_wins(ns: Sequence[int], wins: dict[str, np.ndarray],
                   problems: int) -> dict[str, dict[str, dict[str, float]]]:
    """Mean and population std (``np.std``, as eval.py) over trials of the accuracy wins / problems."""
    out = {}
    for m, w in wins.items():
        mean = w.sum(axis=0) / (w.shape[0] * problems)  # exact integer sum, one rounding
        std = w.std(axis=0) / problems
        out[m] = {str(N): {"mean": float(mean[j]), "std": float(std[j])} for j, N in enumerate(ns)}
    return out


def best_of_n(
    problems: Sequence[Pool],
    ns: Iterable[int] | None = None,
    trials: int = 400,
    seed: int | None = 0,
    pool_size: int | None = None,
    methods: Sequence[str] = METHODS,
    include_exact: bool = True,
    chunk_elements: int = 2_000_000,
    draws: int = DRAWS,
    baselines: Mapping[str, Sequence[np.ndarray]] | None = None,
) -> dict:
    """Best-of-N accuracy as the paper computes it; returns the CLI's JSON document::

        {"methods": {"prm": {"N": {"mean", "std"}}, "orm": .., "majority": .., "pass": ..},
         "ns": [...], "trials": T, "pool_size": n, "problems": P, "seed": S,
         "exact": {"pass": {"N": v}, "prm": {...}, "orm": {...}},
         "intervals": {"methods": {m: {"N": {"low", "high"}}}, "paired": {"prm-orm": {"N": {"diff", "low",
                       "high"}}, "prm-majority": ...}, "draws", "seed", "level", "unit": "problems"}}

    Intervals: a seeded bootstrap over problems of each problem's accuracy over the trials (``intervals.py``);
    ``draws=0`` leaves them out. N keys are strings (as in JSON). A method not requested, or whose score no
    sample carries, is None.
    ``pool_size`` defaults to the largest pool; smaller pools are padded with empty slots.
    ``baselines``: per baseline name, one score array per pool (``baselines.candidate_scores``); each picks its top
    candidate as the PRM does, on the same problems, and gets ``doc["baselines"][name]`` (mean, std per N), its
    interval and the paired PRM − baseline and ORM − baseline differences (``intervals.paired``).
    """
    enc = encode_pools(problems, pool_size)
    ns = _check_ns(ns, enc.pool_size)
    run = [m for m in methods if m not in SCORE_METHODS or enc.has_scores[m]]
    per_problem: dict[str, np.ndarray] = {}
    ns, wins = _simulate_wins(enc, ns, trials, seed, run, chunk_elements, per_problem)
    summary = summarize_wins(ns, wins, enc.problems)
    doc = {
        "methods": {m: summary.get(m) for m in METHODS},
        "ns": list(ns),
        "trials": int(trials),
        "pool_size": enc.pool_size,
        "problems": enc.problems,
        "seed": seed,
    }
    pairs = list(PAIRS)
    if baselines:
        picks: dict[str, Any] = {}
        doc["baselines"] = picks
        for name, scores in baselines.items():
            if len(scores) != len(problems):
                raise ValueError(f"baseline {name!r} scores {len(scores)} problems, the pools hold {len(problems)}")
            rescored = [dataclasses.replace(p, prm_score=np.asarray(s, dtype=float)) for p, s in zip(
                problems, scores, strict=True)]
            picked = encode_pools(rescored, enc.pool_size)
            mine: dict[str, np.ndarray] = {}
            _, won = _simulate_wins(picked, ns, trials, seed, ("prm",), chunk_elements, mine)
            picks[name] = summarize_wins(ns, won, enc.problems)["prm"]
            per_problem[name] = mine["prm"]
            pairs += [(m, name) for m in SCORE_METHODS if m in per_problem]
    if include_exact:
        doc["exact"] = exact_best_of_n(enc, ns)
    if draws:
        doc["intervals"] = best_of_n_intervals({m: w / int(trials) for m, w in per_problem.items()}, ns,
                                               draws=draws, seed=0 if seed is None else int(seed), pairs=pairs)
    return doc

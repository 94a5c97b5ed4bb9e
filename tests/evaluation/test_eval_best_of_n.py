"""Best-of-N: hand-computed cases, the pure-Python trial loop, closed forms vs exhaustive enumeration."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards.evaluation import METHODS, Pool, best_of_n, default_ns, exact_best_of_n, simulate_trials
from rewards.evaluation.reference import enumerate_expected, reference_best_of_n
from rewards.evaluation.synthetic import synthetic_pools


def three() -> Pool:
    # sample 1 (answer b) is the only correct one; PRM ranks it first, ORM ranks sample 0 first.
    return Pool.from_arrays(["a", "b", "a"], [False, True, False], [0.2, 0.9, 0.5], [0.8, 0.1, 0.3], problem="p")


# Hand-computed expectations for three(): N -> {method: value}.
# N=2 subsets {0,1},{0,2},{1,2}: prm picks b, sample 2, b -> 2/3; orm picks 0, 0, 2 -> 0;
# majority: tie a/b (1/2), a (0), tie (1/2) -> 1/3; pass -> 2/3.
HAND = {
    1: {"prm": 1 / 3, "orm": 1 / 3, "majority": 1 / 3, "pass": 1 / 3},
    2: {"prm": 2 / 3, "orm": 0.0, "majority": 1 / 3, "pass": 2 / 3},
    3: {"prm": 1.0, "orm": 0.0, "majority": 0.0, "pass": 1.0},
}


def random_pools(seed: int, problems: int = 6, max_size: int = 9, tie_scores: bool = True) -> list[Pool]:
    rng = np.random.default_rng(seed)
    pools = []
    for i in range(problems):
        k = int(rng.integers(0, max_size + 1))
        answers = [None if rng.random() < 0.2 else "abcd"[int(rng.integers(0, 4))] for _ in range(k)]
        right = "a" if rng.random() < 0.7 else "b"
        correct = [a == right for a in answers]
        prm = rng.integers(0, 4, k) / 4 if tie_scores else rng.random(k)
        prm = [None if rng.random() < 0.1 else float(v) for v in prm]
        orm = [float(v) for v in rng.random(k)]
        pools.append(Pool.from_arrays(answers, correct, prm, orm, problem=f"r{i}"))
    return pools


def test_hand_computed_exact():
    ex = exact_best_of_n([three()], ns=[1, 2, 3])
    for n, row in HAND.items():
        for m in ("prm", "orm", "pass"):
            assert ex[m][str(n)] == pytest.approx(row[m], abs=1e-12)


def test_hand_computed_enumeration():
    for n, row in HAND.items():
        for m in METHODS:
            assert float(enumerate_expected(three(), n, m)) == pytest.approx(row[m], abs=1e-15)


def test_hand_computed_monte_carlo():
    trials = 20000
    doc = best_of_n([three()], ns=[1, 2, 3], trials=trials, seed=1)
    assert doc["ns"] == [1, 2, 3] and doc["pool_size"] == 3 and doc["problems"] == 1 and doc["trials"] == trials
    for n, row in HAND.items():
        for m in METHODS:
            got = doc["methods"][m][str(n)]
            # one problem: each trial is a Bernoulli(p) outcome, so std = sqrt(p(1-p))
            assert got["mean"] == pytest.approx(row[m], abs=4 * math.sqrt(row[m] * (1 - row[m]) / trials) + 1e-12)
            assert got["std"] == pytest.approx(math.sqrt(row[m] * (1 - row[m])), abs=0.01)
    # the whole pool is deterministic here (no ties): exact and zero spread
    for m in METHODS:
        assert doc["methods"][m]["3"] == {"mean": HAND[3][m], "std": 0.0}


def test_padding_counts_empty_slots():
    # pool of 3 padded to 4: one empty slot that is never chosen and never correct
    pools = [three()]
    ex = exact_best_of_n(pools, ns=[1, 2, 4], pool_size=4)
    assert ex["pass"]["1"] == pytest.approx(1 / 4)
    assert ex["pass"]["2"] == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))
    assert ex["pass"]["4"] == pytest.approx(1.0)
    assert ex["prm"]["4"] == pytest.approx(1.0) and ex["orm"]["4"] == 0.0
    for m in METHODS:
        assert float(enumerate_expected(three(), 1, m, pool_size=4)) == pytest.approx(1 / 4)
    doc = best_of_n(pools, ns=[1, 4], trials=4000, seed=0, pool_size=4)
    assert doc["methods"]["prm"]["4"]["mean"] == 1.0 and doc["methods"]["majority"]["4"]["mean"] == 0.0
    assert doc["methods"]["pass"]["1"]["mean"] == pytest.approx(0.25, abs=4 * math.sqrt(0.25 * 0.75 / 4000))


def test_padding_mixed_sizes_and_empty_problem():
    # problem 2 has no samples at all: it counts as a failure for every method and N
    full = Pool.from_arrays(["x"] * 4, [True] * 4, [1, 2, 3, 4], [1, 2, 3, 4])
    empty = Pool.from_arrays([], [])
    doc = best_of_n([full, empty], ns=[1, 4], trials=50, seed=0)
    for m in METHODS:
        assert doc["methods"][m]["4"]["mean"] == 0.5 and doc["methods"][m]["1"]["mean"] == 0.5
    assert exact_best_of_n([full, empty], ns=[1, 4])["pass"] == {"1": 0.5, "4": 0.5}


def test_no_answer_sample_is_never_chosen_nor_counted():
    # the top-scored sample reached no answer (marked correct by a sloppy grader): eval.py drops it
    pool = Pool.from_arrays([None, "w", "w"], [True, False, False], [0.99, 0.1, 0.2], [0.99, 0.1, 0.2])
    doc = best_of_n([pool], ns=[1, 3], trials=200, seed=0)
    for m in METHODS:
        assert doc["methods"][m]["1"]["mean"] == 0.0 and doc["methods"][m]["3"]["mean"] == 0.0
    assert exact_best_of_n([pool], ns=[3])["pass"]["3"] == 0.0


def test_missing_scores_rank_lowest_and_absent_method_is_null():
    # the scored sample wins over unscored ones whenever it is in the subset
    pool = Pool.from_arrays(["r", "w", "w"], [True, False, False], [0.1, None, None], None)
    ex = exact_best_of_n([pool], ns=[1, 2, 3])
    assert ex["prm"] == {"1": pytest.approx(1 / 3), "2": pytest.approx(2 / 3), "3": pytest.approx(1.0)}
    assert ex["orm"] is None
    doc = best_of_n([pool], ns=[1, 2, 3], trials=100, seed=0)
    assert doc["methods"]["orm"] is None and doc["exact"]["orm"] is None
    assert doc["methods"]["prm"]["3"]["mean"] == 1.0
    for n in (1, 2, 3):
        assert float(enumerate_expected(pool, n, "prm")) == pytest.approx(ex["prm"][str(n)], abs=1e-12)


def test_majority_ties_are_uniform():
    # two answers, one sample each, both in every 2-subset of the pool: a fair coin
    pool = Pool.from_arrays(["r", "w"], [True, False], [0, 0], [0, 0])
    trials = 20000
    doc = best_of_n([pool], ns=[2], trials=trials, seed=5)
    assert doc["methods"]["majority"]["2"]["mean"] == pytest.approx(0.5, abs=4 * 0.5 / math.sqrt(trials))
    # tied top scores: uniform among the tied samples too
    assert doc["methods"]["prm"]["2"]["mean"] == pytest.approx(0.5, abs=4 * 0.5 / math.sqrt(trials))
    assert exact_best_of_n([pool], ns=[2])["prm"]["2"] == pytest.approx(0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_equals_enumeration(seed):
    pools = random_pools(seed, problems=5, max_size=7)
    pool_size = 8
    ns = [1, 2, 3, 5, 8]
    ex = exact_best_of_n(pools, ns=ns, pool_size=pool_size)
    for m in ("pass", "prm", "orm"):
        for n in ns:
            enum = sum(enumerate_expected(p, n, m, pool_size) for p in pools) / len(pools)
            assert abs(ex[m][str(n)] - float(enum)) < 1e-12, (m, n)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.lists(
        st.tuples(st.sampled_from([None, "a", "b", "c"]), st.booleans(),
                  st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1))),
        min_size=0, max_size=7),
    extra=st.integers(0, 2),
    n=st.integers(1, 9),
)
def test_closed_form_equals_enumeration_property(data, extra, n):
    answers = [d[0] for d in data]
    pool = Pool.from_arrays(answers, [d[1] for d in data], [d[2] for d in data], [d[2] for d in data])
    pool_size = max(1, len(data) + extra)
    n = min(n, pool_size)
    ex = exact_best_of_n([pool], ns=[n], pool_size=pool_size)
    assert abs(ex["pass"][str(n)] - float(enumerate_expected(pool, n, "pass", pool_size))) < 1e-12
    if ex["prm"] is not None:
        assert abs(ex["prm"][str(n)] - float(enumerate_expected(pool, n, "prm", pool_size))) < 1e-12


@pytest.mark.parametrize("seed", [3, 11])
def test_monte_carlo_matches_enumeration(seed):
    pools = random_pools(seed, problems=6, max_size=8)
    pool_size, ns, trials = 9, [1, 2, 4, 6, 9], 4000
    ns_out, per = simulate_trials(pools, ns, trials=trials, seed=seed, pool_size=pool_size)
    for m in METHODS:
        for j, n in enumerate(ns_out):
            enum = float(sum(enumerate_expected(p, n, m, pool_size) for p in pools) / len(pools))
            col = per[m][:, j]
            tol = 4 * col.std() / math.sqrt(trials) + 1e-9
            assert abs(col.mean() - enum) <= tol, (m, n, col.mean(), enum, tol)


@pytest.mark.parametrize("seed", [0, 7])
def test_vectorised_matches_pure_python_loop(seed):
    pools = random_pools(seed + 100, problems=8, max_size=12)
    pool_size, ns = 14, [1, 3, 7, 14]
    vec = best_of_n(pools, ns=ns, trials=3000, seed=seed, pool_size=pool_size)["methods"]
    ref = reference_best_of_n(pools, ns=ns, trials=600, seed=seed + 1, pool_size=pool_size)
    for m in METHODS:
        for n in ns:
            a, b = vec[m][str(n)], ref[m][str(n)]
            tol = 4 * math.sqrt(a["std"] ** 2 / 3000 + b["std"] ** 2 / 600) + 1e-9
            assert abs(a["mean"] - b["mean"]) <= tol, (m, n, a, b)
            # the spread across trials is the same statistic too
            assert a["std"] == pytest.approx(b["std"], abs=0.2 * max(a["std"], b["std"]) + 1e-9)


def test_vectorised_matches_loop_on_synthetic_pools():
    pools = synthetic_pools(problems=20, pool_size=120, seed=4)
    ns = [1, 10, 60, 120]
    vec = best_of_n(pools, ns=ns, trials=400, seed=0)
    ref = reference_best_of_n(pools, ns=ns, trials=100, seed=1, pool_size=vec["pool_size"])
    for m in METHODS:
        for n in ns:
            a, b = vec["methods"][m][str(n)], ref[m][str(n)]
            tol = 4 * math.sqrt(a["std"] ** 2 / 400 + b["std"] ** 2 / 100) + 1e-9
            assert abs(a["mean"] - b["mean"]) <= tol, (m, n, a, b)
        if m in vec["exact"]:
            for n in ns:
                a = vec["methods"][m][str(n)]
                assert abs(a["mean"] - vec["exact"][m][str(n)]) <= 4 * a["std"] / math.sqrt(400) + 1e-9


def test_seeded_and_chunking_invariant():
    pools = random_pools(5, problems=10, max_size=20)
    a = best_of_n(pools, ns=[1, 5, 20], trials=64, seed=9, pool_size=20)
    b = best_of_n(pools, ns=[1, 5, 20], trials=64, seed=9, pool_size=20)
    c = best_of_n(pools, ns=[1, 5, 20], trials=64, seed=10, pool_size=20)
    assert a == b and a["methods"] != c["methods"]
    # without majority only the permutations consume randomness: any chunk size gives the same trials
    _, big = simulate_trials(pools, [1, 5, 20], 64, 9, 20, methods=("prm", "orm", "pass"), chunk_elements=10**7)
    _, small = simulate_trials(pools, [1, 5, 20], 64, 9, 20, methods=("prm", "orm", "pass"), chunk_elements=1)
    for m in big:
        np.testing.assert_array_equal(big[m], small[m])


def test_output_document_shape():
    doc = best_of_n([three()], trials=10, seed=0)
    assert set(doc) >= {"methods", "ns", "trials", "pool_size", "problems", "exact"}
    assert list(doc["methods"]) == list(METHODS)
    assert doc["ns"] == default_ns(3) == [1, 2, 3]
    assert set(doc["exact"]) == {"pass", "prm", "orm"}
    assert default_ns(1860) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1860]
    assert default_ns(64) == [1, 2, 4, 8, 16, 32, 64]


def test_validation():
    with pytest.raises(ValueError, match="pool_size"):
        best_of_n([three()], ns=[4], trials=2)
    with pytest.raises(ValueError, match="more than pool_size"):
        best_of_n([three()], ns=[1], trials=2, pool_size=2)
    with pytest.raises(ValueError, match="unknown methods"):
        simulate_trials([three()], [1], 2, methods=("best",))
    with pytest.raises(ValueError):
        Pool.from_arrays(["a"], [True, False])


def test_full_scale_runs_and_is_coherent():
    """500 problems x 1,860 samples x 14 Ns at the paper's scale (speed is bench/best_of_n.py's business):
    every accuracy is a probability and the pass@N ceiling never drops as N grows, nor below the methods."""
    pools = synthetic_pools(problems=500, pool_size=1860, seed=0)
    from rewards.evaluation import PAPER_NS

    _, per = simulate_trials(pools, PAPER_NS, trials=3, seed=0, pool_size=1860)
    assert per["prm"].shape == (3, 14)
    for method in ("prm", "orm", "majority", "pass"):
        assert ((per[method] >= 0) & (per[method] <= 1)).all(), method
    ceiling = per["pass"].mean(axis=0)
    assert (np.diff(ceiling) >= -0.02).all(), "sampling noise aside, a bigger N never lowers the ceiling"
    for method in ("prm", "orm", "majority"):
        assert (per[method].mean(axis=0) <= ceiling + 0.02).all(), method

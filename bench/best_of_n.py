"""Benchmark: vectorised best-of-N estimator vs the pure-Python trial loop of the paper's eval script.

Same synthetic data for both (``rewards.evaluation.synthetic``: 500 problems x up to 1,860 samples,
solve rate varying by problem, answers from a small per-problem set, a few samples without an answer,
PRM/ORM scores correlated with correctness), eval.py's 14 values of N, all four methods
(prm, orm, majority, pass).

The pure-Python loop costs ~5 s per trial here, so by default it runs ``--loop-trials 20`` trials and its
time for ``--trials`` trials is extrapolated linearly (trials are independent and identical work);
``--full`` runs the loop for all trials (~30-40 min on 2 cores). Agreement: per (method, N) the
difference of the two means, against the tolerance 4*s*sqrt(1/T_vec + 1/T_loop) + 1/(problems*T_loop),
s = the larger of the two per-trial stds (a z-score of 4 plus one problem of one loop trial); the
vectorised means are also compared with the closed forms (pass, prm, orm).

Usage: ``python bench/best_of_n.py [--problems 500] [--pool-size 1860] [--trials 400]
[--loop-trials 20 | --full] [--seed 0]``. The last line printed is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rewards.evaluation.best_of_n import (  # noqa: E402
    METHODS,
    PAPER_NS,
    _simulate_wins,
    encode_pools,
    exact_best_of_n,
    summarize_wins,
)
from rewards.evaluation.reference import reference_best_of_n  # noqa: E402
from rewards.evaluation.synthetic import synthetic_pools  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--pool-size", type=int, default=1860)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--loop-trials", type=int, default=20, help="trials actually run by the pure-Python loop")
    ap.add_argument("--full", action="store_true", help="run the pure-Python loop for all --trials")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    loop_trials = args.trials if args.full else min(args.loop_trials, args.trials)
    ns = [n for n in PAPER_NS if n <= args.pool_size]
    if ns[-1] != args.pool_size:
        ns.append(args.pool_size)

    t = time.perf_counter()
    pools = synthetic_pools(args.problems, args.pool_size, seed=args.seed)
    print(f"data: {args.problems} problems x pool {args.pool_size} "
          f"({sum(len(p) for p in pools)} samples, smallest pool {min(len(p) for p in pools)}), "
          f"{len(ns)} Ns {ns}; generated in {time.perf_counter() - t:.1f} s", flush=True)

    t = time.perf_counter()
    enc = encode_pools(pools, args.pool_size)
    ns, wins = _simulate_wins(enc, ns, args.trials, args.seed, METHODS, 2_000_000)
    vec_s = time.perf_counter() - t
    vec = summarize_wins(ns, wins, enc.problems)
    print(f"vectorised: {args.trials} trials x {len(ns)} Ns x 4 methods in {vec_s:.2f} s "
          f"({1000 * vec_s / args.trials:.1f} ms/trial)", flush=True)
    t = time.perf_counter()
    exact = exact_best_of_n(enc, ns)
    exact_s = time.perf_counter() - t
    print(f"closed forms (pass, prm, orm): {exact_s:.3f} s", flush=True)

    print(f"pure-Python loop: running {loop_trials} trials ...", flush=True)
    t = time.perf_counter()
    ref = reference_best_of_n(pools, ns, trials=loop_trials, seed=args.seed + 1, pool_size=args.pool_size)
    loop_run_s = time.perf_counter() - t
    loop_s = loop_run_s * args.trials / loop_trials
    speedup = loop_s / vec_s
    note = "measured" if loop_trials == args.trials else f"extrapolated linearly from {loop_trials} trials"
    print(f"pure-Python loop: {loop_trials} trials in {loop_run_s:.1f} s ({loop_run_s / loop_trials:.2f} s/trial); "
          f"{args.trials} trials: {loop_s:.1f} s ({note})")
    print(f"speedup: {speedup:.0f}x")

    max_diff = max_tol = max_z = max_exact_diff = 0.0
    outside = 0
    flagged: list[str] = []
    print(f"{'method':>9} {'N':>5} {'vectorised':>18} {'loop':>18} {'|diff|':>8} {'tol':>8} {'exact':>8}")
    for m in METHODS:
        for n in map(str, ns):
            a, b = vec[m][n], ref[m][n]
            diff = abs(a["mean"] - b["mean"])
            # both columns estimate the same per-trial distribution: its std from the larger sample (or
            # the loop's if larger), plus one problem in one loop trial for the discreteness of accuracy
            sd = max(a["std"], b["std"])
            se = sd * math.sqrt(1 / args.trials + 1 / loop_trials)
            tol = 4 * se + 1 / (args.problems * loop_trials)
            max_diff, max_tol = max(max_diff, diff), max(max_tol, tol)
            max_z = max(max_z, diff / se if se > 1e-12 else 0.0)
            if diff > tol:
                outside += 1
                flagged.append(f"{m}@{n}")
            ex = exact.get(m)
            ex_txt = f"{ex[n]:8.4f}" if ex else "     n/a"
            if ex:
                max_exact_diff = max(max_exact_diff, abs(a["mean"] - ex[n]))
            print(f"{m:>9} {n:>5} {a['mean']:9.4f}±{a['std']:.4f} {b['mean']:9.4f}±{b['std']:.4f} "
                  f"{diff:8.4f} {tol:8.4f} {ex_txt}")
    print(f"agreement: max |diff| {max_diff:.4f}, max tolerance {max_tol:.4f}, max z {max_z:.2f}, "
          f"{outside} of {len(METHODS) * len(ns)} cells outside tolerance; "
          f"max |vectorised - exact| {max_exact_diff:.4f}" + (f" (outside: {', '.join(flagged)})" if flagged else ""))
    print(json.dumps({
        "speedup": round(speedup, 1),
        "max_abs_diff": round(max_diff, 6),
        "tolerance": round(max_tol, 6),
        "cells_outside_tolerance": outside,
        "max_z": round(max_z, 3),
        "max_abs_diff_vs_exact": round(max_exact_diff, 6),
        "vectorised_s": round(vec_s, 3),
        "exact_s": round(exact_s, 4),
        "loop_s": round(loop_s, 1),
        "loop_measured_s": round(loop_run_s, 1),
        "loop_trials": loop_trials,
        "loop_extrapolated": loop_trials != args.trials,
        "trials": args.trials,
        "problems": args.problems,
        "pool_size": args.pool_size,
        "ns": ns,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

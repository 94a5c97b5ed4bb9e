"""Command line: ``best-of-n --samples FILE --out FILE.json [--ns 1,2,4] [--trials 400] [--seed 0] [--pool-size N]``.

Reads the paper's scored samples (``scored-test-samples.jsonl``: one JSON object per sample with
``problem``, ``answer`` or ``given_answer`` (null = no answer reached), ``is_correct``, ``prm_score``,
``orm_score``) and writes::

    {"methods": {"prm": {"N": {"mean": .., "std": ..}}, "orm": .., "majority": .., "pass": ..},
     "ns": [...], "trials": .., "pool_size": .., "problems": .., "seed": .., "seconds": ..,
     "samples_file": .., "exact": {"pass": {"N": ..}, "prm": {..}, "orm": {..}}}

``--pool-size`` defaults to the largest pool in the file (the paper's file: 1860). ``--ns`` defaults to
1, 2, 4, ... up to the pool size plus the pool size; ``--ns paper`` uses eval.py's 14 values.
Exit status: 0 on success, 2 for bad input (the message names file, line and field), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .best_of_n import PAPER_NS, best_of_n
from .pools import ScoredSamplesError, load_scored_samples


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rewards.evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    bon = commands.add_parser("best-of-n", help="best-of-N accuracy of PRM, ORM, majority voting and pass@N")
    bon.add_argument("--samples", required=True, type=Path, help="scored samples JSONL (optionally .gz)")
    bon.add_argument("--out", required=True, type=Path, help="JSON output file")
    bon.add_argument("--ns", default=None, help="comma-separated Ns, or 'paper' (default: powers of 2 + pool size)")
    bon.add_argument("--trials", type=int, default=400)
    bon.add_argument("--seed", type=int, default=0)
    bon.add_argument("--pool-size", type=int, default=None, help="pad every problem to this many samples")
    return parser


def _parse_ns(text: str | None) -> list[int] | None:
    if text is None:
        return None
    if text.strip().lower() == "paper":
        return list(PAPER_NS)
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--ns must be comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        ns = _parse_ns(args.ns)
        started = time.perf_counter()
        pools = load_scored_samples(args.samples)
        if args.ns is not None and args.ns.strip().lower() == "paper":  # eval.py's Ns that fit the pool
            pool_size = args.pool_size or max(len(p) for p in pools)
            assert ns is not None  # "paper" parses to the paper's list of Ns
            ns = [n for n in ns if n <= pool_size] or None
        doc = best_of_n(pools, ns=ns, trials=args.trials, seed=args.seed, pool_size=args.pool_size)
        doc["seconds"] = round(time.perf_counter() - started, 3)
        doc["samples_file"] = str(args.samples)
    except ScoredSamplesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    _print_table(doc)
    return 0


def _print_table(doc: dict) -> None:
    print(f"{doc['problems']} problems, pool size {doc['pool_size']}, {doc['trials']} trials, {doc['seconds']} s")
    print("N".rjust(6) + "".join(m.rjust(16) for m in doc["methods"]))
    for n in doc["ns"]:
        cells = []
        for per_n in doc["methods"].values():
            cells.append("n/a".rjust(16) if per_n is None else
                         f"{100 * per_n[str(n)]['mean']:.2f}±{100 * per_n[str(n)]['std']:.2f}".rjust(16))
        print(str(n).rjust(6) + "".join(cells))


if __name__ == "__main__":
    sys.exit(main())

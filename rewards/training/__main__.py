"""Command line: ``train --config JOB.json`` and ``score --model DIR --input FILE --out FILE.jsonl``.

Exit status: 0 on success, 2 for a bad config, 1 for any other failure (bad dataset row, crash),
with the traceback and a final ``error: ...`` line on stderr.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..node import command_parser, run_cli
from .config import TrainingConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    parser, commands = command_parser("python -m rewards.training", __doc__, {
        "train": "train a PRM or ORM from an exported dataset",
        "score": "score solutions with a trained model",
    }, job_file=("train",))
    score = commands["score"]
    score.add_argument("--model", required=True, type=Path, help="folder written by train")
    score.add_argument("--input", required=True, type=Path,
                       help="JSONL/Parquet rows {id, prompt, completions|completion}")
    score.add_argument("--out", required=True, type=Path, help="JSONL output")
    score.add_argument("--batch-size", type=int, default=16)
    score.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: cuda when present)")
    return parser


def _train(args: argparse.Namespace) -> None:
    from .pipeline import run_training

    config = load_config(args.config)
    metrics = run_training(config)
    print(f"trained {metrics.kind} in {metrics.runtime_s or 0.0:.1f}s -> {config.output_dir}")


def _score(args: argparse.Namespace) -> None:
    from .scoring import load_reward_model, score_file

    model = load_reward_model(args.model, device=args.device, batch_size=args.batch_size)
    rows = score_file(model, args.input, args.out)
    print(f"scored {rows} rows -> {args.out}")


def main(argv: list[str] | None = None) -> int:
    """Run a command; returns the exit status."""
    return run_cli(_parser(), {"train": _train, "score": _score}, argv, usage_errors=(TrainingConfigError,))


if __name__ == "__main__":
    sys.exit(main())

"""Command line: ``sample --config JOB.json`` and ``rollouts --config JOB.json``.

Exit status: 0 on success, 2 for a bad config, problems or solutions file, 1 for any other failure (with the
traceback and a final ``error: ...`` line on stderr).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..node import run_cli
from .config import SamplingConfigError, load_config, load_rollout_config
from .rollouts import SolutionsError, read_solutions, run_rollouts
from .sampler import ProblemsError, read_problems, run_sampling


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rewards.sampling", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sample = commands.add_parser("sample", help="sample N solutions per problem into an import-ready JSONL")
    sample.add_argument("--config", required=True, type=Path, help="job JSON file")
    rollouts = commands.add_parser("rollouts", help="Monte-Carlo step estimates of solutions into a JSONL")
    rollouts.add_argument("--config", required=True, type=Path, help="job JSON file")
    return parser


def _sample(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    read_problems(config.problems, config.limit)  # bad rows fail before the model loads
    print(json.dumps(run_sampling(config)))


def _rollouts(args: argparse.Namespace) -> None:
    config = load_rollout_config(args.config)
    read_solutions(config.solutions, config.limit)  # bad rows fail before the model loads
    print(json.dumps(run_rollouts(config)))


def main(argv: list[str] | None = None) -> int:
    """Run a command; returns the exit status."""
    return run_cli(_parser(), {"sample": _sample, "rollouts": _rollouts}, argv,
                   usage_errors=(SamplingConfigError, ProblemsError, SolutionsError))


if __name__ == "__main__":
    sys.exit(main())

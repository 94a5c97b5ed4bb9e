"""Command line: ``sample --config JOB.json`` and ``rollouts --config JOB.json``.

Exit status: 0 on success, 2 for a bad config, problems or solutions file or a job that stopped with its finished
rows kept (a spent token budget, a served model that stopped answering: started again, it continues from them), 1
for any other failure (with the traceback and a final ``error: ...`` line on stderr).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..node import command_parser, run_cli
from .config import SamplingConfigError, load_config, load_rollout_config
from .rollouts import SolutionsError, read_solutions, run_rollouts
from .sampler import ProblemsError, SamplingStopped, read_problems, run_sampling


def _parser() -> argparse.ArgumentParser:
    parser, _ = command_parser("python -m rewards.sampling", __doc__, {
        "sample": "sample N solutions per problem into an import-ready JSONL",
        "rollouts": "Monte-Carlo step estimates of solutions into a JSONL",
    }, job_file=("sample", "rollouts"))
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
                   usage_errors=(SamplingConfigError, ProblemsError, SolutionsError, SamplingStopped))


if __name__ == "__main__":
    sys.exit(main())

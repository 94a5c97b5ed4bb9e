"""Command line: ``sample --config JOB.json``.

Exit status: 0 on success, 2 for a bad config or problems file, 1 for any other failure (with the
traceback and a final ``error: ...`` line on stderr).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from .config import SamplingConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rewards.sampling", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    sample = commands.add_parser("sample", help="sample N solutions per problem into an import-ready JSONL")
    sample.add_argument("--config", required=True, type=Path, help="job JSON file")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command; returns the exit status."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = _parser().parse_args(argv)
    from .sampler import ProblemsError, read_problems, run_sampling

    try:
        config = load_config(args.config)
        read_problems(config.problems, config.limit)  # bad rows fail before the model loads
        summary = run_sampling(config)
        print(json.dumps(summary))
    except (SamplingConfigError, ProblemsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the CLI reports every failure the same way
        traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The export flags export_dataset and snapshot_dataset share: one definition, so their defaults cannot drift."""
from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from rewards.exports import NEUTRAL_POLICIES, STEP_MODES, ExportOptions


def add_export_arguments(parser: CommandParser, *, steps_help: str) -> None:
    parser.add_argument("--neutral", choices=NEUTRAL_POLICIES, default="positive")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split by problem")
    parser.add_argument("--test-fraction", type=float, default=0.1)
    qc = parser.add_mutually_exclusive_group()
    qc.add_argument("--include-qc", dest="include_qc", action="store_true", default=None,
                    help="keep QC and screening solutions (default: prm800k keeps them, like the release; "
                         "the training formats leave them out)")
    qc.add_argument("--exclude-qc", dest="include_qc", action="store_false",
                    help="leave QC and screening solutions out of prm800k too")
    parser.add_argument("--steps", choices=STEP_MODES, default="auto", help=steps_help)


def export_options(options: dict[str, Any]) -> ExportOptions:
    """The parsed flags as ExportOptions (ValueError when they do not go together)."""
    return ExportOptions(neutral=options["neutral"], seed=options["seed"], test_fraction=options["test_fraction"],
                         include_qc=options["include_qc"], steps=options["steps"])

"""Shared bits of the import commands: their common arguments, campaign lookup and error reporting."""
from __future__ import annotations

from collections.abc import Callable

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from annotate.permissions import SYSTEM
from annotate.services.campaign_problems import bank_access
from annotate.services.importing import ImportFailed, ImportReport


class ImportCommand(BaseCommand):
    """An import: the file first, then the command's own options (``add_options``), then ``--skip-invalid``."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        self.add_options(parser)
        parser.add_argument("--skip-invalid", action="store_true", help="import valid rows, report the rest")

    def add_options(self, parser: CommandParser) -> None:
        """The options of this import (``--campaign`` and the like)."""


def get_campaign(slug: str) -> Campaign:
    campaign = Campaign.objects.filter(slug=slug).first()
    if campaign is None:
        raise CommandError(f"campaign {slug!r} does not exist")
    return campaign


def run_import(command: BaseCommand, action: Callable[[], ImportReport], *, skip_invalid: bool) -> ImportReport:
    try:
        with bank_access(SYSTEM):  # a command runs with the operator's authority: the staff bank included
            report: ImportReport = action()
    except ImportFailed as failed:
        for item in failed.report.rejected:
            command.stderr.write(str(item))
        if failed.report.rejected_count > len(failed.report.rejected):
            command.stderr.write(f"… and {failed.report.rejected_count - len(failed.report.rejected)} more")
        raise CommandError(
            f"{failed.report.rejected_count} invalid line(s) in {failed.report.file}; nothing was imported "
            "(use --skip-invalid to import the valid lines)"
        ) from None
    except FileNotFoundError as error:
        raise CommandError(f"cannot read {error.filename}: no such file") from None
    for item in report.rejected:
        command.stderr.write(f"skipped {item}")
    created = ", ".join(f"{k}={v}" for k, v in report.created.items())
    command.stdout.write(f"imported {report.imported} of {report.lines} line(s) from {report.file}"
                         f" ({created}); skipped {report.rejected_count}")
    return report

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from rewards.exports import write_rows
from rewards.formats import registry as formats
from rewards.management.export_options import add_export_arguments, export_options


class Command(BaseCommand):
    help = "Write one dataset format of a campaign to one file (JSONL, or Parquet when PATH ends in .parquet)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--format", required=True, choices=[fmt.name for fmt in formats.formats()],
                            help="; ".join(f"{fmt.name}: {fmt.help}" for fmt in formats.formats()))
        parser.add_argument("--out", required=True, type=Path)
        parser.add_argument("--sources", default="",
                            help="consensus: comma-separated label sources, e.g. human,mc:smollm2; outcome: "
                                 "comma-separated row sources of labeled, imported, sampled, pool (default: all)")
        add_export_arguments(parser, steps_help="trl-stepwise: 'chosen' path only, or every rated 'alternatives' "
                                                "completion after its chosen prefix; 'auto' picks alternatives when "
                                                "the labels carry rated alternatives")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"campaign {options['campaign']!r} does not exist")
        try:
            fmt = formats.get(options["format"])
            if options["out"].suffix == ".parquet":
                fmt.schema()  # a format without a Parquet form says so before any row is read
            extra = {"sources": [key.strip() for key in options["sources"].split(",") if key.strip()] or None}
            rows = fmt.rows(campaign, export_options(options), **{key: extra[key] for key in fmt.options})
            written = write_rows(rows, options["out"], fmt.name)
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"wrote {written.rows} row(s) to {written.path} sha256={written.sha256}")

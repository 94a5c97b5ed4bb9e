from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from rewards.consensus import iter_consensus_rows
from rewards.exports import FORMATS, export_campaign, write_rows
from rewards.management.export_options import add_export_arguments, export_options


class Command(BaseCommand):
    help = "Write one dataset format of a campaign to one file (JSONL, or Parquet when PATH ends in .parquet)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--format", required=True, choices=(*FORMATS, "consensus"),
                            help="consensus: the steps on which the chosen label sources agree (JSONL)")
        parser.add_argument("--out", required=True, type=Path)
        parser.add_argument("--sources", default="",
                            help="consensus: comma-separated label sources, e.g. human,mc:smollm2 (default: all)")
        add_export_arguments(parser, steps_help="trl-stepwise: 'chosen' path only, or every rated 'alternatives' "
                                                "completion after its chosen prefix; 'auto' picks alternatives when "
                                                "the labels carry rated alternatives")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"campaign {options['campaign']!r} does not exist")
        try:
            if options["format"] == "consensus":
                if options["out"].suffix == ".parquet":
                    raise ValueError("consensus rows are nested JSON (label_sources): write them to a .jsonl file")
                sources = [key.strip() for key in options["sources"].split(",") if key.strip()] or None
                written = write_rows(iter_consensus_rows(campaign, export_options(options), sources),
                                     options["out"], "consensus")
            else:
                written = export_campaign(campaign, options["format"], options["out"], export_options(options))
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"wrote {written.rows} row(s) to {written.path} sha256={written.sha256}")

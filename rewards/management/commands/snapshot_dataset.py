from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from rewards.management.export_options import add_export_arguments, export_options
from rewards.models import DatasetVersion
from rewards.services.datasets import create_dataset_version


class Command(BaseCommand):
    help = "Snapshot a campaign's labels as a new dataset version (every format) and print its id and folder."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        add_export_arguments(parser, steps_help="trl-stepwise step mode (see export_dataset --steps)")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"campaign {options['campaign']!r} does not exist")
        try:
            chosen = export_options(options)
        except ValueError as error:
            raise CommandError(str(error)) from None
        version = create_dataset_version(campaign, options=chosen)
        if version is None:
            latest = DatasetVersion.objects.filter(campaign=campaign).order_by("-number").first()
            assert latest is not None
            self.stdout.write(f"unchanged: labels equal version {latest.number} id={latest.pk} folder={latest.folder}")
            return
        self.stdout.write(f"version {version.number} id={version.pk} folder={version.folder}")

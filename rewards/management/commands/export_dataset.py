from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotate.models import Campaign
from rewards.exports import FORMATS, NEUTRAL_POLICIES, STEP_MODES, ExportOptions, export_campaign


class Command(BaseCommand):
    help = "Write one dataset format of a campaign to one file (JSONL, or Parquet when PATH ends in .parquet)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--out", required=True, type=Path)
        parser.add_argument("--neutral", choices=NEUTRAL_POLICIES, default="positive")
        parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split by problem")
        parser.add_argument("--test-fraction", type=float, default=0.1)
        qc = parser.add_mutually_exclusive_group()
        qc.add_argument("--include-qc", dest="include_qc", action="store_true", default=None,
                        help="keep QC and screening solutions (default: prm800k keeps them, like the release; "
                             "the training formats leave them out)")
        qc.add_argument("--exclude-qc", dest="include_qc", action="store_false",
                        help="leave QC and screening solutions out of prm800k too")
        parser.add_argument("--steps", choices=STEP_MODES, default="auto",
                            help="trl-stepwise: 'chosen' path only, or every rated 'alternatives' completion after its "
                                 "chosen prefix; 'auto' picks alternatives when the labels carry rated alternatives")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"campaign {options['campaign']!r} does not exist")
        try:
            written = export_campaign(
                campaign, options["format"], options["out"],
                ExportOptions(neutral=options["neutral"], seed=options["seed"],
                              test_fraction=options["test_fraction"], include_qc=options["include_qc"],
                              steps=options["steps"]),
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"wrote {written.rows} row(s) to {written.path} sha256={written.sha256}")

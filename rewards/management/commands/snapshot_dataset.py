from django.core.management.base import BaseCommand, CommandError

from annotate.models import Campaign
from rewards.exports import NEUTRAL_POLICIES, STEP_MODES, ExportOptions
from rewards.models import DatasetVersion
from rewards.services.datasets import create_dataset_version


class Command(BaseCommand):
    help = "Snapshot a campaign's labels as a new dataset version (every format) and print its id and folder."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--campaign", required=True)
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
                            help="trl-stepwise step mode (see export_dataset --steps)")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"campaign {options['campaign']!r} does not exist")
        try:
            export_options = ExportOptions(neutral=options["neutral"], seed=options["seed"],
                                           test_fraction=options["test_fraction"], include_qc=options["include_qc"],
                                           steps=options["steps"])
        except ValueError as error:
            raise CommandError(str(error)) from None
        version = create_dataset_version(campaign, options=export_options)
        if version is None:
            latest = DatasetVersion.objects.filter(campaign=campaign).order_by("-number").first()
            assert latest is not None
            self.stdout.write(f"unchanged: labels equal version {latest.number} id={latest.pk} folder={latest.folder}")
            return
        self.stdout.write(f"version {version.number} id={version.pk} folder={version.folder}")

from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotate.models import Campaign, CampaignMode
from annotate.services.prm800k_import import import_prm800k

from ._common import ImportCommand, run_import


class Command(ImportCommand):
    help = ("Import PRM800K JSONL rows (exactly as OpenAI released them) into a campaign. A campaign this "
            "command creates takes the mode its rows imply (conversational when most rows are phase-1 rows, whose "
            "steps carry several rated completions; else stepwise) unless --mode says otherwise.")

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True, help="campaign slug (created if missing)")
        parser.add_argument("--mode", choices=CampaignMode.values,
                            help="mode of the campaign when this import creates it (default: implied by the rows)")

    def handle(self, *args: Any, **options: Any) -> None:
        mode = options["mode"]
        existing = Campaign.objects.filter(slug=options["campaign"]).first()
        if existing is not None and mode and existing.mode != mode:
            raise CommandError(f"campaign {existing.slug!r} exists in {existing.mode} mode; --mode {mode} applies "
                               "only to a campaign this import creates")
        created = existing is None
        campaign = existing or Campaign.objects.create(slug=options["campaign"], name=options["campaign"],
                                                       mode=mode or CampaignMode.STEPWISE)
        try:
            run_import(self, lambda: import_prm800k(options["file"], campaign, skip_invalid=options["skip_invalid"],
                                                    adopt_mode=created and not mode),
                       skip_invalid=options["skip_invalid"])
        except CommandError:
            if created:  # nothing was imported: do not leave an empty campaign behind
                campaign.delete()
            raise
        if created:
            campaign.refresh_from_db(fields=["mode"])
            self.stdout.write(f"created campaign {campaign.slug!r} in {campaign.mode} mode")

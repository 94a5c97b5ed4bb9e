"""manage.py import_pool FILE --name NAME [--campaign SLUG] [--split-rule RULE]
[--purpose evaluation|labeling]"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from annotate.permissions import SYSTEM
from annotate.services.campaign_problems import bank_access
from annotate.services.importing import ImportFailed
from stepcore.steprules import STEP_RULE_DETAIL, step_rule_argument

from ...services.pools import import_pool


class Command(BaseCommand):
    help = "Import a best-of-N candidate pool (JSONL), split each candidate into steps and grade it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--name", required=True)
        parser.add_argument("--campaign", help="campaign slug the pool belongs to (its dashboard shows it)")
        parser.add_argument("--split-rule", default=None, type=step_rule_argument,
                            help=f"step rule (default: the campaign's, else auto): {STEP_RULE_DETAIL}")
        parser.add_argument("--purpose", default="evaluation", choices=("evaluation", "labeling"),
                            help="labeling: the campaign's candidate pool for active-learning generations")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = None
        if options["campaign"]:
            campaign = Campaign.objects.filter(slug=options["campaign"]).first()
            if campaign is None:
                raise CommandError(f"--campaign: no campaign {options['campaign']!r}")
        try:
            with bank_access(SYSTEM):  # a command runs with the operator's authority: the staff bank included
                pool, report = import_pool(options["file"], options["name"], campaign=campaign,
                                           split_rule=options["split_rule"], purpose=options["purpose"])
        except ImportFailed as exc:
            for line in exc.report.rejected:
                self.stderr.write(str(line))
            raise CommandError(str(exc)) from None
        except (ValueError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"pool {pool.pk} {pool.name!r}: {report.created['problems']} problems, "
                          f"{report.created['candidates']} candidates, {report.created['correct']} correct")

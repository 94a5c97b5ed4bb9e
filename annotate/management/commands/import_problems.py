from typing import Any

from django.core.management.base import CommandParser

from annotate.services.problems import import_problems

from ._common import ImportCommand, get_campaign, run_import


class Command(ImportCommand):
    help = ("Import MATH / MATH-500 rows (problem, solution, answer, subject, level, unique_id) or generic rows "
            "(question, question_id, options, answer, category) into a campaign's "
            "problems (--campaign), or without --campaign into the staff-only problem bank, whose problems are "
            "copied into a campaign the first time one of its imports references them.")

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", help="campaign slug; omitted: the staff-only problem bank")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = get_campaign(options["campaign"]) if options["campaign"] else None
        run_import(self, lambda: import_problems(options["file"], campaign, skip_invalid=options["skip_invalid"]),
                   skip_invalid=options["skip_invalid"])

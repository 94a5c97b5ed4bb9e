from typing import Any

from django.core.management.base import CommandParser

from annotate.services.problems import import_solutions
from annotate.steps import SPLIT_RULES

from ._common import ImportCommand, get_campaign, run_import


class Command(ImportCommand):
    help = ("Import generator samples (problem_id or problem, solution text or steps, optional answer, "
            "verifier_score); split into steps and graded against the ground truth.")

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--split", choices=SPLIT_RULES, default="auto", help="step splitting rule")
        parser.add_argument("--generation", type=int, default=None, help="generation for rows that name none")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = get_campaign(options["campaign"])
        run_import(
            self,
            lambda: import_solutions(options["file"], campaign, skip_invalid=options["skip_invalid"],
                                     split_rule=options["split"], generation=options["generation"]),
            skip_invalid=options["skip_invalid"],
        )

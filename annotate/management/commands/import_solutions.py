from typing import Any

from django.core.management.base import CommandParser

from annotate.services.problems import import_solutions
from stepcore.steprules import STEP_RULE_DETAIL, step_rule_argument

from ._common import ImportCommand, get_campaign, run_import


class Command(ImportCommand):
    help = ("Import generator samples (problem_id or problem, solution text or steps, optional answer, "
            "verifier_score), or generic rows (question_id, response or steps, model; pred kept as provenance); "
            "split by the campaign's step rule and graded by its grader.")

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--split", type=step_rule_argument, default=None,
                            help=f"step rule (default: the campaign's): {STEP_RULE_DETAIL}")
        parser.add_argument("--generation", type=int, default=None, help="generation for rows that name none")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = get_campaign(options["campaign"])
        run_import(
            self,
            lambda: import_solutions(options["file"], campaign, skip_invalid=options["skip_invalid"],
                                     split_rule=options["split"], generation=options["generation"]),
            skip_invalid=options["skip_invalid"],
        )

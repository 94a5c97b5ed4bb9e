from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotate.services.machine_labels import import_machine_labels

from ._common import ImportCommand, get_campaign, run_import


class Command(ImportCommand):
    help = ("Import machine step labels of a campaign's solutions as a named source: Math-Shepherd-style soft "
            "labels (`labels`), an OmegaPRM-style first-error index (`first_error`) or PRM800K rows; each row "
            "names its solution by `solution_id` or by `problem` + `steps`. Human ratings are never touched.")

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--source", required=True, help="the source's name, e.g. math-shepherd-7b")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = get_campaign(options["campaign"])
        try:
            run_import(self, lambda: import_machine_labels(options["file"], campaign, source=options["source"],
                                                           skip_invalid=options["skip_invalid"]),
                       skip_invalid=options["skip_invalid"])
        except ValueError as error:
            raise CommandError(str(error)) from None

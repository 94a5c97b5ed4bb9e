from django.core.management.base import BaseCommand

from annotate.services.problems import import_problems

from ._common import run_import


class Command(BaseCommand):
    help = "Import MATH / MATH-500 rows (problem, solution, answer, subject, level, unique_id)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("file")
        parser.add_argument("--skip-invalid", action="store_true")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        run_import(self, lambda: import_problems(options["file"], skip_invalid=options["skip_invalid"]),
                   skip_invalid=options["skip_invalid"])

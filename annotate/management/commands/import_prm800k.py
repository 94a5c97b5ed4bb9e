from django.core.management.base import BaseCommand

from annotate.prm800k import import_prm800k

from ._common import get_campaign, run_import


class Command(BaseCommand):
    help = "Import PRM800K JSONL rows (exactly as OpenAI released them) into a campaign."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("file")
        parser.add_argument("--campaign", required=True, help="campaign slug (created if missing)")
        parser.add_argument("--skip-invalid", action="store_true", help="import valid rows, report the rest")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        campaign = get_campaign(options["campaign"], create=True)
        run_import(self, lambda: import_prm800k(options["file"], campaign, skip_invalid=options["skip_invalid"]),
                   skip_invalid=options["skip_invalid"])

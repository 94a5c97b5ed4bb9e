"""manage.py train_reward_model --campaign SLUG [--version N] --kind prm|orm [--subsets 25,50,100] [--max-steps …]

``--subsets`` starts one job per size on nested prefixes of the training rows (the data-efficiency curve).
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotate.permissions import SYSTEM
from rewards.models import DatasetVersion

from ...services.training import JobInputError, TrainingRequest, start_training_job


class Command(BaseCommand):
    help = "Queue PRM/ORM training jobs on a dataset version."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument("--version", type=int, help="version number (default: the newest ready one)")
        parser.add_argument("--kind", action="append", choices=("prm", "orm"), help="repeatable; default both")
        parser.add_argument("--base-model", default="default")
        parser.add_argument("--backend", default="local")
        parser.add_argument("--subsets", default="", help="comma-separated training-set sizes")
        for name, kind in (("max-steps", int), ("epochs", float), ("learning-rate", float), ("batch-size", int),
                           ("max-length", int), ("seed", int)):
            parser.add_argument(f"--{name}", type=kind)

    def handle(self, *args: Any, **options: Any) -> None:
        versions = DatasetVersion.objects.filter(campaign__slug=options["campaign"], status="ready")
        chosen = versions.filter(number=options["version"]) if options["version"] else versions.order_by("-number")
        version = chosen.first()
        if version is None:
            raise CommandError(f"--version: no ready dataset version of campaign {options['campaign']!r}")
        hyper = {key: options[key] for key in ("max_steps", "epochs", "learning_rate", "batch_size", "max_length",
                                               "seed") if options[key] is not None}
        try:
            sizes: list[int | None] = [int(s) for s in options["subsets"].split(",") if s.strip()] or [None]
        except ValueError:
            raise CommandError(f"--subsets: expected comma-separated integers, got {options['subsets']!r}") from None
        with transaction.atomic():
            for kind in options["kind"] or ["prm", "orm"]:
                for size in sizes:
                    try:
                        job = start_training_job(TrainingRequest(
                            kind=kind, dataset_version=version, base_model=options["base_model"],
                            backend=options["backend"], hyper={**hyper, **({"limit": size} if size else {})}),
                            user=SYSTEM)
                    except JobInputError as exc:
                        raise CommandError(str(exc)) from None
                    self.stdout.write(f"{kind} job {job.pk} queued on {version}" + (f" (first {size})" if size else ""))

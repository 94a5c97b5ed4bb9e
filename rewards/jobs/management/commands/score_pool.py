"""manage.py score_pool --pool NAME [--campaign SLUG] --model ID [--backend local|slurm|kubernetes]"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.permissions import SYSTEM

from ...models import RewardModel
from ...services.pools import pool_named
from ...services.scoring import start_scoring_job
from ...services.training import JobInputError


class Command(BaseCommand):
    help = "Queue a scoring job: a registered reward model scores every candidate of a pool."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pool", required=True, help="pool name")
        parser.add_argument("--campaign", help="campaign slug (pool names are unique per campaign)")
        parser.add_argument("--model", required=True, type=int, help="RewardModel id")
        parser.add_argument("--backend", default="local")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            pool = pool_named(options["pool"], options["campaign"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        model = RewardModel.objects.filter(pk=options["model"]).first()
        if model is None:
            raise CommandError(f"--model: no reward model {options['model']}")
        try:
            job = start_scoring_job(model, pool=pool, backend=options["backend"], user=SYSTEM)
        except JobInputError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"scoring job {job.pk} queued")

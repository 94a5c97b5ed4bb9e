"""``manage.py create_campaign SLUG --name NAME``: a campaign with its domain settings (scale, grader, step rule)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug

from annotate.models import CampaignMode
from annotate.scales import NAMED, PM1
from annotate.services.campaigns import CampaignAdminError, create_campaign
from stepcore.graders import DEFAULT_GRADER, GRADERS
from stepcore.steprules import STEP_RULE_DETAIL


def _scale(value: str) -> dict[str, Any]:
    """A built-in scale's name, or a JSON file (or inline JSON object) defining a custom scale."""
    if value in NAMED:  # PRM800K's scale is stored as the default (empty), as every existing campaign has it
        return {} if value == PM1.name else {"name": value}
    text = value if value.lstrip().startswith("{") else None
    if text is None:
        path = Path(value)
        if not path.is_file():
            raise CommandError(f"--scale: {value!r} is neither {', '.join(NAMED)} nor a JSON file")
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CommandError(f"--scale: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise CommandError("--scale: the JSON must be an object with name and values")
    return data


class Command(BaseCommand):
    help = ("Create a campaign with its label scale (pm1, binary, or a custom scale as JSON), outcome grader and "
            "step rule; --admin makes that user its admin.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--scale", default="pm1",
                            help="pm1 (−1/0/+1, default), binary, or a JSON file / object defining 2–5 values")
        parser.add_argument("--grader", default=DEFAULT_GRADER, choices=sorted(GRADERS))
        parser.add_argument("--grader-config", default="{}", help="the grader's settings as a JSON object, "
                                                                  "e.g. '{\"pattern\": \"Answer: (.*)\"}' for regex")
        parser.add_argument("--steps", default="auto", help=f"step rule (default auto): {STEP_RULE_DETAIL}")
        parser.add_argument("--error-categories", default="",
                            help="comma-separated kinds of error a labeler may name on an error step")
        parser.add_argument("--mode", default=CampaignMode.STEPWISE, choices=CampaignMode.values)
        parser.add_argument("--admin", help="username of the campaign's admin")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            validate_slug(options["slug"])
        except ValidationError:
            raise CommandError(f"SLUG: {options['slug']!r} must be letters, digits, dashes or underscores") from None
        creator = None
        if options["admin"]:
            creator = get_user_model().objects.filter(username=options["admin"]).first()
            if creator is None:
                raise CommandError(f"--admin: no user {options['admin']!r}")
        try:
            grader_config = json.loads(options["grader_config"])
        except json.JSONDecodeError as error:
            raise CommandError(f"--grader-config: not valid JSON ({error})") from None
        categories = [c.strip() for c in options["error_categories"].split(",") if c.strip()]
        try:
            campaign = create_campaign(
                creator=creator, slug=options["slug"], name=options["name"], mode=options["mode"],
                step_scale=_scale(options["scale"]), grader=options["grader"], grader_config=grader_config,
                step_rule=options["steps"], error_categories=categories)
        except CampaignAdminError as error:
            flag = {"step_scale": "--scale", "step_rule": "--steps", "grader": "--grader",
                    "error_categories": "--error-categories", "slug": "SLUG"}.get(error.field, error.field)
            raise CommandError(f"{flag}: {error.message}") from None
        self.stdout.write(f"created campaign {campaign.slug!r} (scale {campaign.step_scale.get('name', 'pm1')}, "
                          f"grader {campaign.grader}, steps {campaign.step_rule})"
                          + (f"; admin {creator.get_username()}" if creator else ""))

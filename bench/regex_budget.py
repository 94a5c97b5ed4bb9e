"""Patterns with a budget: the time of a 32-character catastrophic pattern (``(a+)+$`` over ``"a" * 31 + "b"``) at
every place a user can supply one, and the server's answer for a 1,000,000-character step.

    .venv/bin/python bench/regex_budget.py [--chars 1000000] [--victim 32]

Runs the real views through Django's test client on a fresh SQLite database in a temporary folder (migrated
first): the pool upload page and API, the solutions import page (its job run as the worker runs it) and API, a
campaign step rule saved in the settings service, the regex grader (ground truth and config pattern); then the
lease and labeling page, and the re-split page (GET and POST), of a solution whose first step is ``"\\(x"`` repeated to
``--chars`` characters (openers and never a closer). Targets: each pattern < 1 s; each answer < 2 s.
Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PATTERN = "(a+)+$"
RULE = f"regex:{PATTERN}"


def _timed(figures: dict[str, float], name: str, action: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = action()
    figures[name] = round(time.perf_counter() - started, 4)
    print(f"{name:<34} {figures[name]:8.4f} s", flush=True)
    return result


def _check(response: Any, expected: int, what: str) -> None:
    if response.status_code != expected:
        raise SystemExit(f"{what}: HTTP {response.status_code} (expected {expected}): "
                         f"{response.content.decode()[:400]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=1_000_000, help="length of the huge step")
    parser.add_argument("--victim", type=int, default=32, help="length of the text the pattern runs over")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="regex-budget-"))
    os.environ.update({"DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}", "REDIS_URL": "",
                       "DJANGO_SETTINGS_MODULE": "steplab.settings", "STEPLAB_VAR_DIR": str(work / "var"),
                       "MEDIA_ROOT": str(work / "media"), "STEPLAB_JOBS_ROOT": str(work / "jobs")})
    import django

    django.setup()
    from django.conf import settings
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    setup_test_environment()
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.MEDIA_ROOT = str(work / "media")
    settings.STEPLAB_JOBS_ROOT = work / "jobs"
    call_command("migrate", verbosity=0)

    from annotate.models import Campaign, ImportJob, Membership, Problem, Role
    from annotate.services.campaigns import run_import_job, update_campaign
    from stepcore.graders import get_grader
    from tests.factories import SolutionFactory, UserFactory

    victim = "a" * (args.victim - 1) + "b"
    campaign = Campaign.objects.create(slug="budget", name="Budget")
    problem = Problem.objects.create(campaign=campaign, text="How many a's?", answer="31", source_id="p1")
    boss = UserFactory(username="boss")
    labeler = UserFactory(username="labeler")
    Membership.objects.create(campaign=campaign, user=boss, role=Role.ADMIN)
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    client = Client()
    client.force_login(boss)
    pool_line = json.dumps({"problem": problem.text, "solution": victim, "ground_truth": "31"}).encode() + b"\n"
    solution_line = json.dumps({"problem_id": "p1", "solution": victim, "answer": "31"}).encode() + b"\n"
    figures: dict[str, float] = {}
    client.get(reverse("jobs:pool_upload", args=[campaign.slug]))  # the first request loads the views: not timed

    def upload(name: str, body: bytes) -> SimpleUploadedFile:
        return SimpleUploadedFile(name, body)

    _check(_timed(figures, "pool_upload_page_s", lambda: client.post(
        reverse("jobs:pool_upload", args=[campaign.slug]),
        {"file": upload("pool.jsonl", pool_line), "name": "page", "split_rule": RULE})), 302, "pool upload page")
    _check(_timed(figures, "pool_upload_api_s", lambda: client.post(
        reverse("jobs:api_pools", args=[campaign.slug]),
        {"file": upload("pool.jsonl", pool_line), "name": "api", "split_rule": RULE})), 201, "pool upload API")
    _check(_timed(figures, "import_api_s", lambda: client.post(
        f"/api/campaigns/{campaign.pk}/import-solutions/",
        {"file": upload("s.jsonl", solution_line), "split_rule": RULE})), 201, "solutions import API")
    _timed(figures, "campaign_step_rule_saved_s", lambda: update_campaign(campaign=campaign, step_rule=RULE))
    _check(client.post(reverse("manage:imports", args=[campaign.slug]),
                       {"kind": "solutions", "file": upload("s.jsonl", solution_line)}), 302, "import page")
    job = ImportJob.objects.latest("id")
    _timed(figures, "import_job_campaign_rule_s", lambda: run_import_job(job.pk))
    job.refresh_from_db()
    if job.status != "succeeded":
        raise SystemExit(f"the import job under the campaign's rule ended {job.status}: {job.error}")
    grader = get_grader("regex")
    _timed(figures, "regex_grader_ground_truth_s", lambda: grader.grade(PATTERN, victim))
    configured = get_grader("regex", {"pattern": PATTERN})
    _timed(figures, "regex_grader_config_pattern_s", lambda: configured.extract(victim))

    huge = ("\\(x" * (args.chars // 3 + 1))[:args.chars]
    big = Campaign.objects.create(slug="huge-step", name="Huge step")
    Membership.objects.create(campaign=big, user=boss, role=Role.ADMIN)
    Membership.objects.create(campaign=big, user=labeler, role=Role.LABELER)
    big_problem = Problem.objects.create(campaign=big, text="How many?", answer="31", source_id="p1")
    solution = SolutionFactory(campaign=big, problem=big_problem, steps=[huge, "So the answer is $31$."])
    labeling = Client()
    labeling.force_login(labeler)
    # the lease and its redirect once (the workspace template is compiled on first use), then the page itself
    started = _timed(figures, "labeling_start_s", lambda: labeling.post(reverse("annotate:start", args=[big.slug])))
    _check(started, 302, "start labeling")
    page = _timed(figures, "labeling_page_s", lambda: labeling.get(started["Location"]))
    _check(page, 200, "labeling page")
    if "\\(x\\(x" not in page.content.decode():
        raise SystemExit("the labeling page does not show the huge step")
    resplit_url = reverse("manage:resplit", args=[big.slug, solution.pk])
    _check(_timed(figures, "resplit_page_s", lambda: client.get(resplit_url)), 200, "re-split page")
    _check(_timed(figures, "resplit_post_s", lambda: client.post(
        resplit_url, {"steps": huge[:args.chars - 40] + "\n\nSo the answer is $31$.\n\nChecked."})), 302,
        "re-split POST")  # the whole text within the step limit

    # not a server answer: the scan alone over the text richest in math (a short span every 5 characters)
    from annotate.rendering import math_source

    _timed(figures, "math_scan_dense_spans_s", lambda: math_source(("$$x" * (args.chars // 3 + 1))[:args.chars]))

    pattern_worst = max(value for key, value in figures.items() if not key.startswith(("labeling", "resplit", "math")))
    answer_worst = max(value for key, value in figures.items() if key.startswith(("labeling", "resplit")))
    print(f"worst pattern {pattern_worst:.4f} s (target < 1 s), worst answer for a {args.chars:,}-character step "
          f"{answer_worst:.4f} s (target < 2 s)")
    print(json.dumps({"bench": "regex_budget", "victim_chars": args.victim, "step_chars": args.chars, **figures,
                      "worst_pattern_s": pattern_worst, "worst_answer_s": answer_worst,
                      "pattern_target_met": pattern_worst < 1.0, "answer_target_met": answer_worst < 2.0}))


if __name__ == "__main__":
    main()

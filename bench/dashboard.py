"""Campaign dashboard benchmark: 100,000 solutions / 1,000,000 ratings on PostgreSQL.

    .venv/bin/python bench/dashboard.py [--solutions 100000] [--steps 10] [--overlap-share 0.2] [--database-url URL]

Fills a fresh database (default: steplab_bench_dashboard on 127.0.0.1) with one campaign — solutions of
``steps`` steps, one finished labeling each (every rating on the step), ``overlap-share`` of them with a second
labeling and some gold QC — then times the server-side render of /manage/c/<slug>/ (Django test client,
session login, 20 renders after 3 warm-ups; progress aggregates from their 30 s cache, and again with
``?fresh=1`` bypassing it) and the Celery-side metrics snapshot that the page reads.
Target: dashboard median <= 300 ms. Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--solutions", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--overlap-share", type=float, default=0.0)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/steplab_bench_dashboard")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")
    sys.path.insert(0, str(ROOT))
    _create_database(args.database_url)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slug = f"bench-{args.solutions}-{args.steps}"
    started = time.perf_counter()
    campaign, ratings = _fill(slug, args.solutions, args.steps, args.overlap_share)
    fill_s = time.perf_counter() - started
    print(f"data: {args.solutions} solutions, {ratings} ratings (filled in {fill_s:.1f} s)")

    from annotate.services.agreement import compute_campaign_metrics

    started = time.perf_counter()
    compute_campaign_metrics(campaign)
    metrics_s = time.perf_counter() - started
    print(f"metrics snapshot (Celery task): {metrics_s:.1f} s")

    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user, _ = get_user_model().objects.get_or_create(username="bench-staff", defaults={"is_staff": True})
    client = Client()
    client.force_login(user)
    def render(url: str) -> tuple[list[float], int]:
        times = []
        for number in range(args.renders + 3):
            reset_queries()
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(url, HTTP_HOST="localhost")
                elapsed = (time.perf_counter() - t0) * 1000
            assert response.status_code == 200, response.status_code
            if number >= 3:
                times.append(elapsed)
        return sorted(times), len(queries)

    figures = {}
    for name, url in (("dashboard", f"/manage/c/{slug}/"), ("dashboard_uncached", f"/manage/c/{slug}/?fresh=1")):
        times, queries = render(url)
        median, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        figures[name] = {"median_ms": round(median, 1), "p90_ms": round(p90, 1), "max_ms": round(times[-1], 1),
                         "queries": queries}
        print(f"{name} render: median {median:.1f} ms, p90 {p90:.1f} ms, max {times[-1]:.1f} ms, {queries} queries")
    median = figures["dashboard"]["median_ms"]
    print(f"target: dashboard median <= 300 ms: {'PASS' if median <= 300 else 'FAIL'} ({median} ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(json.dumps({"solutions": args.solutions, "ratings": ratings, **figures,
                      "metrics_snapshot_s": round(metrics_s, 1), "target_ms": 300, "pass": median <= 300}))


def _create_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _fill(slug: str, solutions: int, steps: int, overlap_share: float):  # type: ignore[no-untyped-def]
    """Bulk rows through the importers' COPY helper; reused when the campaign already exists."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from annotate.models import Assignment, Campaign, Completion, Membership, Problem, Rating, Solution, Step
    from steplab.bulk import insert_rows

    campaign = Campaign.objects.filter(slug=slug).first()
    if campaign is not None:
        return campaign, Rating.objects.filter(assignment__solution__campaign=campaign).count()
    rng = random.Random(0)
    now = timezone.now()
    with transaction.atomic():
        campaign = Campaign.objects.create(slug=slug, name=slug, overlap=2 if overlap_share else 1)
        users = [get_user_model().objects.create(username=f"{slug}-labeler-{i}") for i in range(50)]
        for user in users:
            Membership.objects.create(campaign=campaign, user=user)
        problem_ids = insert_rows(Problem, ["campaign_id", "text", "text_sha256", "key_sha256", "answer"],
                                  [(campaign.pk, f"{slug} problem {i}", f"{slug}-{i:058d}"[-64:],
                                    f"{slug}-{i:058d}"[-64:], "1") for i in range(solutions // 10)])
        solution_rows = []
        for i in range(solutions):
            qc = i % 50 == 0
            solution_rows.append((campaign.pk, problem_ids[i // 10], i % 4, qc,
                                  (rng.randrange(-1, steps) if qc else None)))
        solution_ids = insert_rows(Solution, ["campaign_id", "problem_id", "generation", "is_quality_control",
                                              "gold_first_error"], solution_rows)
        step_ids = insert_rows(Step, ["solution_id", "index"], [(s, i) for s in solution_ids for i in range(steps)])
        completion_ids = insert_rows(Completion, ["step_id", "index", "text"],
                                     [(s, 0, f"Step text $x_{s % 97}$") for s in step_ids])
        labelings = [(s, k) for k, s in enumerate(solution_ids)]
        labelings += [(s, k) for k, s in enumerate(solution_ids) if rng.random() < overlap_share]
        assignment_rows = []
        for solution_id, _ in labelings:
            user = users[rng.randrange(len(users))]
            assignment_rows.append((solution_id, user.pk, "submitted", rng.choice(["solution", "found_error"]),
                                    now - timedelta(minutes=rng.randrange(60 * 24 * 30)),
                                    rng.randrange(5_000, 300_000)))
        assignment_ids = insert_rows(Assignment, ["solution_id", "labeler_id", "status", "finish_reason",
                                                  "finished_at", "total_time_ms"], assignment_rows)
        index_of = {s: k for k, s in enumerate(solution_ids)}
        rating_rows = []
        for assignment_id, (solution_id, _) in zip(assignment_ids, labelings, strict=True):
            base = index_of[solution_id] * steps
            for i in range(steps):
                rating_rows.append((assignment_id, completion_ids[base + i], rng.choice((-1, 0, 1, 1, 1)),
                                    rng.randrange(1_000, 60_000)))
            if len(rating_rows) >= 200_000:
                insert_rows(Rating, ["assignment_id", "completion_id", "rating", "time_ms"], rating_rows)
                rating_rows = []
        insert_rows(Rating, ["assignment_id", "completion_id", "rating", "time_ms"], rating_rows)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return campaign, len(assignment_ids) * steps


if __name__ == "__main__":
    main()

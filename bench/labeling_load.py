"""Labeling load benchmark: 50 concurrent labelers against a local gunicorn server on PostgreSQL.

    .venv/bin/python bench/labeling_load.py [--solutions 100000] [--steps 10] [--labelers 50]
        [--per-labeler 6] [--workers 2] [--think-ms 0] [--reuse-database] [--database-url URL]

Builds a fresh database (default: steplab_labeling_bench on 127.0.0.1) holding 100,000 solutions and
1,000,000 existing step ratings (a PRM800K-shaped file loaded with ``manage.py import_prm800k``), starts
gunicorn on it, and drives it with one thread per labeler through the real pages: log in (all of them, before
anyone labels), "Start labeling" (lease), one htmx rating POST per step (a −1 now and then ends the solution as
found_error), "next" (finish + lease the next one). By default the labelers never pause (``--think-ms 0``):
the server is saturated and the figures are its worst case. Latencies are server-side: gunicorn's access log
``%(D)s`` (µs per request); the client-side figures (what a labeler waits, queueing included) are printed too.
Afterwards the database is checked: every rating the driver saw acknowledged is there exactly once,
no solution went beyond its overlap, none went twice to the same labeler.

Workers: one sync worker per core (2) by default. Requests here are CPU-bound Python (~20 ms of CPU each, a
few ms waiting on PostgreSQL), so more workers than cores only time-slice each request: measured with 4
workers, server-side p95 rises by ~30 ms while what the client waits stays the same (at 1 s of think time:
client p95 106 ms with 4 workers, 96 ms with 2).
Targets on the 2-core machine: rating POST p95 <= 50 ms, lease p95 <= 100 ms, zero errors, zero lost or
duplicated ratings. Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from import_export import generate  # noqa: E402  (same PRM800K-shaped generator as the import benchmark)
from serving import wait_until_healthy  # noqa: E402

PASSWORD = "bench-Steplab-1"
SLUG = "bench"


@dataclass
class LabelerStats:
    acknowledged: dict[int, dict[int, int]] = field(default_factory=dict)  # assignment -> step -> rating
    errors: list[str] = field(default_factory=list)
    solutions_done: int = 0
    rate_client_ms: list[float] = field(default_factory=list)  # as the labeler waits: queueing included
    lease_client_ms: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def import_history(args: argparse.Namespace, env: dict[str, str]) -> None:
    """A fresh database holding ``args.solutions`` PRM800K-shaped labeled solutions (shared with
    bench/whole_solution.py)."""
    import psycopg

    name = args.database_url.rsplit("/", 1)[-1]
    admin_url = args.database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "existing.jsonl"
        ratings = generate(source, args.solutions, args.steps)
        started = time.perf_counter()
        subprocess.run([sys.executable, "manage.py", "import_prm800k", str(source), "--campaign", SLUG],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"existing data: {args.solutions} solutions / {ratings} step ratings imported in "
              f"{time.perf_counter() - started:.1f} s", flush=True)


def prepare_database(args: argparse.Namespace, env: dict[str, str]) -> None:
    import_history(args, env)
    # Each solution already has its imported labeling; leave room for one more labeler per solution.
    setup = f"""
from django.contrib.auth import get_user_model
from django.db.models import Max
from annotate.models import Campaign, Membership, Solution
campaign = Campaign.objects.get(slug={SLUG!r})
top = Solution.objects.filter(campaign=campaign).aggregate(m=Max('label_count'))['m'] or 0
campaign.overlap = top + 1
campaign.save(update_fields=['overlap'])
User = get_user_model()
template = User(username='x'); template.set_password({PASSWORD!r})
users = User.objects.bulk_create([User(username=f'load{{i:03d}}', password=template.password)
                                  for i in range({args.labelers})])
Membership.objects.bulk_create([Membership(campaign=campaign, user=u, role='labeler', passed_screening=True)
                                for u in users])
print('overlap', campaign.overlap)
"""
    subprocess.run([sys.executable, "manage.py", "shell", "-c", setup], cwd=ROOT, env=env, check=True)


def labeler(base: str, index: int, per_labeler: int, steps: int, stats: LabelerStats, seed: int,
            logged_in: threading.Barrier, think_ms: float) -> None:
    rng = random.Random(seed)
    session = requests.Session()
    try:
        # Logins hash a password (PBKDF2, ~0.3 s CPU each): 50 at once on 2 cores queue for a while.
        session.get(f"{base}/accounts/login/", timeout=180)
        response = session.post(f"{base}/accounts/login/", timeout=180, allow_redirects=False, data={
            "username": f"load{index:03d}", "password": PASSWORD,
            "csrfmiddlewaretoken": session.cookies["csrftoken"]})
        if response.status_code != 302:
            stats.errors.append(f"login {response.status_code}")
            logged_in.abort()
            return
        # Everyone labels only once all have logged in: 50 password hashes (PBKDF2, ~15 s of CPU in all)
        # would otherwise compete with the first labelers' ratings, and logging in is not what this measures.
        logged_in.wait(timeout=300)
        headers = {"X-CSRFToken": session.cookies["csrftoken"], "HX-Request": "true"}
        sent = time.perf_counter()
        response = session.post(f"{base}/c/{SLUG}/start", headers=headers, timeout=30, allow_redirects=False)
        stats.lease_client_ms.append((time.perf_counter() - sent) * 1000)
        for _ in range(per_labeler):
            match = re.match(r"^/assignments/(\d+)/$", response.headers.get("Location", ""))
            if response.status_code != 302 or not match:
                stats.errors.append(f"lease {response.status_code} {response.headers.get('Location')}")
                return
            assignment = int(match.group(1))
            given = stats.acknowledged.setdefault(assignment, {})
            first_error = rng.randrange(steps) if rng.random() < 0.3 else -1
            for step in range(steps):
                value = -1 if step == first_error else rng.choice((0, 1, 1))
                if think_ms:  # reading the step: 0.5–1.5 × the mean
                    time.sleep(think_ms * rng.uniform(0.5, 1.5) / 1000)
                sent = time.perf_counter()
                rated = session.post(f"{base}/assignments/{assignment}/rate", headers=headers, timeout=30, data={
                    "step_index": step, "rating": value, "time_ms": rng.randrange(500, 20_000)})
                stats.rate_client_ms.append((time.perf_counter() - sent) * 1000)
                if rated.status_code != 200:
                    stats.errors.append(f"rate {rated.status_code} {rated.text[:200]}")
                    return
                given[step] = value
                if value == -1:
                    break
            sent = time.perf_counter()
            response = session.post(f"{base}/assignments/{assignment}/next", headers=headers, timeout=30,
                                    allow_redirects=False)
            stats.lease_client_ms.append((time.perf_counter() - sent) * 1000)
            stats.solutions_done += 1
    except requests.RequestException as error:
        stats.errors.append(f"connection: {error}")
        logged_in.abort()
    except threading.BrokenBarrierError:
        stats.errors.append("another labeler could not log in")


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def verify(env: dict[str, str], all_stats: list[LabelerStats]) -> dict[str, int]:
    """Compare what the driver saw acknowledged with what the database holds."""
    expected = {a: steps for stats in all_stats for a, steps in stats.acknowledged.items()}
    script = f"""
import json
from django.db.models import Count, F
from annotate.models import Assignment, Campaign, Rating, Solution
ids = {sorted(expected)!r}
rows = list(Rating.objects.filter(assignment_id__in=ids, completion__index=0)
            .values_list('assignment_id', 'completion__step__index', 'rating'))
pairs = Rating.objects.filter(assignment_id__in=ids).values('assignment_id', 'completion_id').annotate(n=Count('id'))
campaign = Campaign.objects.get(slug={SLUG!r})
over = Solution.objects.filter(campaign=campaign).annotate(
    n=Count('assignments', filter=~__import__('django').db.models.Q(assignments__status='expired'))
).filter(n__gt=campaign.overlap).count()
twice = (Assignment.objects.filter(solution__campaign=campaign, labeler__username__startswith='load')
         .values('solution_id', 'labeler_id').annotate(n=Count('id')).filter(n__gt=1).count())
print(json.dumps({{'rows': rows, 'duplicates': sum(1 for p in pairs if p['n'] > 1), 'over_overlap': over,
                  'same_labeler_twice': twice}}))
"""
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    found = json.loads(out)
    stored = {(a, s): r for a, s, r in found["rows"]}
    lost = sum(1 for a, steps in expected.items() for s, r in steps.items() if stored.get((a, s)) != r)
    return {"lost_ratings": lost, "duplicated_ratings": found["duplicates"],
            "solutions_over_overlap": found["over_overlap"],
            "solutions_twice_to_one_labeler": found["same_labeler_twice"],
            "ratings_checked": sum(len(s) for s in expected.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--labelers", type=int, default=50)
    parser.add_argument("--per-labeler", type=int, default=6, help="solutions each labeler labels")
    parser.add_argument("--workers", type=int, default=2,
                        help="gunicorn worker processes (default: one per core of the 2-core machine; see below)")
    parser.add_argument("--think-ms", type=float, default=0,
                        help="mean time a labeler reads a step before rating it (default 0: back to back, the "
                             "server saturated)")
    parser.add_argument("--reuse-database", action="store_true",
                        help="keep the database a previous run built (its labelers go on to new solutions)")
    parser.add_argument("--database-url", default=os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/steplab_labeling_bench"))
    args = parser.parse_args()
    # All simulated labelers log in from 127.0.0.1: lift the per-address login limit (10/min) for the run.
    env = dict(os.environ, DATABASE_URL=args.database_url, DB_CONN_MAX_AGE="60", DEBUG="0", LOG_LEVEL="WARNING",
               STEPLAB_LOGIN_RATE="100000/m")
    env.pop("REDIS_URL", None)
    if not args.reuse_database:
        prepare_database(args, env)
    setup = resource.getrusage(resource.RUSAGE_CHILDREN)
    setup_cpu = setup.ru_utime + setup.ru_stime

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        access_log = Path(tmp) / "access.log"
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "steplab.wsgi", "-b", f"127.0.0.1:{port}", "-w", str(args.workers),
             "--access-logfile", str(access_log), "--access-logformat", "%(m)s %(U)s %(s)s %(D)s", "--log-level",
             "warning"], cwd=ROOT, env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            if not wait_until_healthy(base, attempts=120, pause_s=0.5):
                sys.exit("gunicorn did not come up")
            all_stats = [LabelerStats() for _ in range(args.labelers)]
            logged_in = threading.Barrier(args.labelers)
            threads = [threading.Thread(target=labeler, args=(base, i, args.per_labeler, args.steps, all_stats[i], i,
                                                              logged_in, args.think_ms))
                       for i in range(args.labelers)]
            started, driver_cpu = time.perf_counter(), time.process_time()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall, driver_cpu = time.perf_counter() - started, time.process_time() - driver_cpu
        finally:
            server.terminate()
            server.wait(timeout=30)
        server_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)  # gunicorn and its workers (and the setup)
        rate_ms, lease_ms, statuses = [], [], {}
        lines = access_log.read_text().splitlines()
        for line in lines:
            method, path, status, micros = line.split()
            statuses[status] = statuses.get(status, 0) + 1
            if method == "POST" and path.endswith("/rate"):
                rate_ms.append(int(micros) / 1000)
            elif method == "POST" and (path.endswith("/start") or path.endswith("/next")):
                lease_ms.append(int(micros) / 1000)
    errors = [e for stats in all_stats for e in stats.errors]
    rate_client = [ms for stats in all_stats for ms in stats.rate_client_ms]
    lease_client = [ms for stats in all_stats for ms in stats.lease_client_ms]
    server_errors = sum(n for status, n in statuses.items() if status.startswith("5"))
    checks = verify(env, all_stats)
    result = {
        "labelers": args.labelers, "solutions_labeled": sum(s.solutions_done for s in all_stats),
        "existing_solutions": args.solutions, "wall_s": round(wall, 1),
        "requests_per_s": round(len(lines) / wall, 1),
        "server_cpu_s": round(server_cpu.ru_utime + server_cpu.ru_stime - setup_cpu, 1),
        "driver_cpu_s": round(driver_cpu, 1),
        "rating_posts": len(rate_ms), "rating_post_p50_ms": round(percentile(rate_ms, 0.5), 1),
        "rating_post_p95_ms": round(percentile(rate_ms, 0.95), 1),
        "leases": len(lease_ms), "lease_p50_ms": round(percentile(lease_ms, 0.5), 1),
        "lease_p95_ms": round(percentile(lease_ms, 0.95), 1),
        "rating_post_client_p50_ms": round(percentile(rate_client, 0.5), 1),
        "rating_post_client_p95_ms": round(percentile(rate_client, 0.95), 1),
        "lease_client_p50_ms": round(percentile(lease_client, 0.5), 1),
        "lease_client_p95_ms": round(percentile(lease_client, 0.95), 1),
        "gunicorn_workers": args.workers, "think_ms": args.think_ms,
        "errors": len(errors) + server_errors, **checks,
    }
    result["targets_met"] = (result["rating_post_p95_ms"] <= 50 and result["lease_p95_ms"] <= 100
                             and result["errors"] == 0 and checks["lost_ratings"] == 0
                             and checks["duplicated_ratings"] == 0 and checks["solutions_over_overlap"] == 0)
    for message in errors[:10]:
        print("error:", message)
    print(f"rating POST: n={result['rating_posts']} p50={result['rating_post_p50_ms']} ms "
          f"p95={result['rating_post_p95_ms']} ms (target <= 50)")
    print(f"lease: n={result['leases']} p50={result['lease_p50_ms']} ms p95={result['lease_p95_ms']} ms "
          "(target <= 100)")
    print(f"as the client waits (queueing in the listen backlog included): rating POST "
          f"p50={result['rating_post_client_p50_ms']} ms p95={result['rating_post_client_p95_ms']} ms, lease "
          f"p50={result['lease_client_p50_ms']} ms p95={result['lease_client_p95_ms']} ms")
    print(f"errors={result['errors']} lost_ratings={checks['lost_ratings']} "
          f"duplicated_ratings={checks['duplicated_ratings']} over_overlap={checks['solutions_over_overlap']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

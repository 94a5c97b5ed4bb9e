"""Whole-solution labeling benchmark: one POST per solution against today's per-step path, at the same load.

    .venv/bin/python bench/whole_solution.py [--solutions 5000] [--steps 10] [--labelers 50]
        [--per-labeler 6] [--workers 2] [--reuse-database] [--database-url URL]

Builds a fresh database (default: steplab_whole_bench on 127.0.0.1) holding ``--solutions`` PRM800K-shaped
solutions (``manage.py import_prm800k``, as bench/labeling_load.py does), gives each labeler a write API token,
starts gunicorn and drives it with one thread per labeler, as a program labels: lease a solution
(``POST /api/campaigns/{id}/lease/``), then label it either step by step (one ``/rate/`` per step and a
``/finish/``: today's path) or whole (one ``/labeling/``). Each labeler alternates the two paths, solution by
solution, so both run under the same load at the same time. A solution's time is what labeling it costs after
the lease: the sum of its requests, server-side (gunicorn's ``%(D)s``) and as the client waits. Afterwards the
database is checked: every labeled solution holds exactly the ratings sent.
Target: whole-solution median <= 100 ms per solution (Label Studio 1.23: one 326 ms POST per solution).
Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import random
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
from labeling_load import free_port, import_history, percentile  # noqa: E402
from serving import wait_until_healthy  # noqa: E402

SLUG = "bench"
PATHS = ("per_step", "whole")


@dataclass
class LabelerStats:
    sent: dict[int, list[int]] = field(default_factory=dict)  # assignment -> the ratings it holds now
    path_of: dict[int, str] = field(default_factory=dict)  # assignment -> how it was labeled
    client_ms: dict[str, list[float]] = field(default_factory=lambda: {path: [] for path in PATHS})
    errors: list[str] = field(default_factory=list)


def make_labelers(args: argparse.Namespace, env: dict[str, str]) -> tuple[int, list[str]]:
    """A fresh set of labelers (new names on a reused database) with write tokens: the campaign id and the tokens."""
    script = f"""
import json, uuid
from django.contrib.auth import get_user_model
from django.db.models import Max
from annotate.models import Campaign, Membership, Solution
from api.services import create_token
campaign = Campaign.objects.get(slug={SLUG!r})
top = Solution.objects.filter(campaign=campaign).aggregate(m=Max('label_count'))['m'] or 0
campaign.overlap = top + 1
campaign.save(update_fields=['overlap'])
run = uuid.uuid4().hex[:6]
users = get_user_model().objects.bulk_create([get_user_model()(username=f'judge-{{run}}-{{i:03d}}')
                                              for i in range({args.labelers})])
Membership.objects.bulk_create([Membership(campaign=campaign, user=u, role='labeler', passed_screening=True)
                                for u in users])
print(json.dumps([campaign.pk, [create_token(u, name='bench', scope='write')[1] for u in users]]))
"""
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    campaign, tokens = json.loads(out)
    return int(campaign), list(tokens)


def labeler(base: str, campaign: int, token: str, per_labeler: int, steps: int, stats: LabelerStats,
            seed: int, ready: threading.Barrier) -> None:
    rng = random.Random(seed)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    try:
        ready.wait(timeout=120)
        for number in range(per_labeler):
            lease = session.post(f"{base}/api/campaigns/{campaign}/lease/", timeout=60)
            assignment = (lease.json().get("assignment") or {}).get("id") if lease.status_code == 200 else None
            if assignment is None:
                stats.errors.append(f"lease {lease.status_code} {lease.text[:200]}")
                return
            first_error = rng.randrange(steps) if rng.random() < 0.3 else -1
            values = [rng.choice((0, 1, 1)) for _ in range(steps)]
            if first_error >= 0:
                values = values[:first_error] + [-1]
            path = PATHS[(number + seed) % 2]
            url = f"{base}/api/assignments/{assignment}"
            sent = time.perf_counter()
            if path == "whole":
                answers = [session.post(f"{url}/labeling/", timeout=60, json={
                    "ratings": [{"step_index": i, "rating": v} for i, v in enumerate(values)],
                    "client_key": f"{seed}-{number}"})]
            else:
                answers = [session.post(f"{url}/rate/", timeout=60, json={"step_index": i, "rating": v})
                           for i, v in enumerate(values)]
                answers.append(session.post(f"{url}/finish/", timeout=60, json={
                    "reason": "found_error" if first_error >= 0 else "solution"}))
            stats.client_ms[path].append((time.perf_counter() - sent) * 1000)
            failed = [a for a in answers if a.status_code != 200]
            if failed:
                stats.errors.append(f"{path} {failed[0].status_code} {failed[0].text[:200]}")
                return
            stats.sent[assignment], stats.path_of[assignment] = values, path
    except (requests.RequestException, threading.BrokenBarrierError) as error:
        stats.errors.append(f"connection: {error}")


def verify(env: dict[str, str], expected: dict[int, list[int]]) -> dict[str, int]:
    """Every labeled solution holds exactly the ratings sent, once, and is submitted."""
    script = f"""
import json
from annotate.models import Assignment, Rating
ids = {sorted(expected)!r}
rows = list(Rating.objects.filter(assignment_id__in=ids).order_by('assignment_id', 'completion__step__index')
            .values_list('assignment_id', 'rating'))
open_ = Assignment.objects.filter(pk__in=ids).exclude(status='submitted').count()
print(json.dumps({{'rows': rows, 'not_submitted': open_}}))
"""
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    found = json.loads(out)
    stored: dict[int, list[int]] = {}
    for assignment, rating in found["rows"]:
        stored.setdefault(assignment, []).append(rating)
    wrong = sum(1 for assignment, values in expected.items() if stored.get(assignment) != values)
    return {"solutions_with_wrong_ratings": wrong, "solutions_not_submitted": found["not_submitted"]}


def server_ms_per_solution(log: Path, path_of: dict[int, str]) -> dict[str, list[float]]:
    """Per labeled solution, the server time of its labeling requests (the lease left out), by path."""
    per_assignment: dict[int, float] = {}
    for line in log.read_text().splitlines():
        method, url, _, micros = line.split()
        parts = url.strip("/").split("/")  # api/assignments/<id>/<action>
        if method == "POST" and len(parts) == 4 and parts[1] == "assignments":
            assignment = int(parts[2])
            per_assignment[assignment] = per_assignment.get(assignment, 0.0) + int(micros) / 1000
    out: dict[str, list[float]] = {path: [] for path in PATHS}
    for assignment, path in path_of.items():
        out[path].append(per_assignment.get(assignment, float("nan")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=int, default=5_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--labelers", type=int, default=50)
    parser.add_argument("--per-labeler", type=int, default=6, help="solutions each labeler labels (half each way)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (one per core)")
    parser.add_argument("--reuse-database", action="store_true",
                        help="keep the database a previous run built (new labelers go on to new solutions)")
    parser.add_argument("--database-url", default=os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/steplab_whole_bench"))
    args = parser.parse_args()
    env = dict(os.environ, DATABASE_URL=args.database_url, DB_CONN_MAX_AGE="60", DEBUG="0", LOG_LEVEL="WARNING")
    env.pop("REDIS_URL", None)
    if args.reuse_database:  # a database of an earlier code version: bring its schema up to date
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    else:
        import_history(args, env)
    campaign, tokens = make_labelers(args, env)

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
            all_stats = [LabelerStats() for _ in tokens]
            ready = threading.Barrier(len(tokens))
            threads = [threading.Thread(target=labeler, args=(base, campaign, token, args.per_labeler, args.steps,
                                                              all_stats[i], i, ready))
                       for i, token in enumerate(tokens)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(timeout=30)
        path_of = {a: p for stats in all_stats for a, p in stats.path_of.items()}
        server_ms = server_ms_per_solution(access_log, path_of)
    errors = [e for stats in all_stats for e in stats.errors]
    client_ms = {path: [ms for stats in all_stats for ms in stats.client_ms[path]] for path in PATHS}
    checks = verify(env, {a: v for stats in all_stats for a, v in stats.sent.items()})
    result: dict[str, object] = {"labelers": args.labelers, "steps": args.steps, "gunicorn_workers": args.workers,
                                 "wall_s": round(wall, 1)}
    for path in PATHS:
        result[f"{path}_solutions"] = len(server_ms[path])
        result[f"{path}_median_ms"] = round(percentile(server_ms[path], 0.5), 1)
        result[f"{path}_p95_ms"] = round(percentile(server_ms[path], 0.95), 1)
        result[f"{path}_client_median_ms"] = round(percentile(client_ms[path], 0.5), 1)
        result[f"{path}_client_p95_ms"] = round(percentile(client_ms[path], 0.95), 1)
    result["label_studio_ms"] = 326
    result["errors"] = len(errors)
    result.update(checks)
    result["target_met"] = (float(str(result["whole_median_ms"])) <= 100 and not errors
                            and not any(checks.values()))
    for message in errors[:10]:
        print("error:", message)
    for path, words in (("per_step", "per-step path (10 x /rate/ + /finish/)"), ("whole", "one /labeling/ POST")):
        print(f"{words}: n={result[f'{path}_solutions']} median={result[f'{path}_median_ms']} ms "
              f"p95={result[f'{path}_p95_ms']} ms per solution server-side; as the client waits "
              f"median={result[f'{path}_client_median_ms']} ms p95={result[f'{path}_client_p95_ms']} ms")
    print(f"target: whole-solution median <= 100 ms (Label Studio: 326 ms); errors={len(errors)} {checks}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

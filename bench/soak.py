"""Soak: concurrent simulated labelers against the production-like stack, then a no-loss audit.

    .venv/bin/python bench/soak.py [--users 100] [--duration 600] [--solutions 20000] [--steps 8]

Starts, on this machine: a fresh PostgreSQL database (default steplab_soak), gunicorn (production settings,
plain HTTP) on 127.0.0.1:8123, and a Celery worker with beat on Redis db 12 that snapshots the campaign's dataset
every minute while the labelers work. Each simulated labeler logs in through the real login form, then loops
start/next → workspace → rate every step (1 in 10 solutions ends on a −1, found_error) exactly as the browser does
(htmx POSTs with the CSRF header). Afterwards every acknowledged rating (HTTP 200) is compared with the table:
each must be there exactly once with the acknowledged value.

Prints requests/s, p50/p95/p99 per endpoint and the error count; the last line is JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

import requests
from serving import wait_until_healthy

ROOT = Path(__file__).resolve().parents[1]
PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"
PASSWORD = "soak-Password-1"
STEP_ROW = re.compile(r'data-step-index="(\d+)"')
WORKSPACE = re.compile(r"/assignments/(\d+)/")


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.acknowledged: dict[tuple[int, int], int] = {}  # (assignment, step) -> last acknowledged rating

    def record(self, endpoint: str, seconds: float, ok: bool) -> None:
        with self.lock:
            self.latency[endpoint].append(seconds)
            if not ok:
                self.errors[endpoint] += 1


def _timed(stats: Stats, endpoint: str, call, ok_codes=(200, 302)):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    try:
        response = call()
    except requests.RequestException:
        stats.record(endpoint, time.perf_counter() - start, False)
        return None
    stats.record(endpoint, time.perf_counter() - start, response.status_code in ok_codes)
    return response


def labeler(number: int, slug: str, deadline: float, stats: Stats, seed: int) -> None:
    rng = random.Random(seed + number)
    session = requests.Session()
    session.get(f"{BASE}/accounts/login/", timeout=30)
    login = _timed(stats, "login", lambda: session.post(
        f"{BASE}/accounts/login/", data={"username": f"soak{number}", "password": PASSWORD,
                                         "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
        headers={"Referer": f"{BASE}/accounts/login/"}, allow_redirects=False, timeout=30))
    if login is None or login.status_code != 302:
        return
    headers = {"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": BASE + "/"}
    response = _timed(stats, "lease", lambda: session.post(f"{BASE}/c/{slug}/start", headers=headers,
                                                           allow_redirects=False, timeout=30))
    while response is not None and time.time() < deadline:
        match = WORKSPACE.search(response.headers.get("Location", ""))
        if not match:
            return  # no work left
        assignment = int(match.group(1))
        # partial, not a lambda: the request is bound to this iteration's assignment (it is sent at once anyway).
        page = _timed(stats, "workspace", partial(session.get, f"{BASE}/assignments/{assignment}/", timeout=30),
                      ok_codes=(200,))
        if page is None or page.status_code != 200:
            return
        steps = sorted({int(i) for i in STEP_ROW.findall(page.text)})
        error_at = rng.choice(steps) if steps and rng.random() < 0.1 else None
        hx = dict(headers, **{"HX-Request": "true"})
        for index in steps:
            value = -1 if index == error_at else rng.choice((0, 1, 1))
            rated = _timed(stats, "rate", partial(
                session.post, f"{BASE}/assignments/{assignment}/rate", headers=hx,
                data={"step_index": index, "rating": value, "time_ms": rng.randrange(500, 20_000)}, timeout=30),
                ok_codes=(200,))
            if rated is not None and rated.status_code == 200:
                with stats.lock:
                    stats.acknowledged[(assignment, index)] = value
            if value == -1:
                break
        response = _timed(stats, "next", partial(session.post, f"{BASE}/assignments/{assignment}/next",
                                                 headers=headers, allow_redirects=False, timeout=30))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _setup(env: dict[str, str], users: int, solutions: int, steps: int) -> None:
    code = f"""
import json, tempfile
from pathlib import Path
from django.contrib.auth import get_user_model
from annotate.models import Campaign, Membership, Role
from annotate.services.problems import import_problems, import_solutions
campaign = Campaign.objects.create(slug="soak", name="soak", overlap=2, lease_minutes=30, export_interval_minutes=1)
tmp = Path(tempfile.mkdtemp())
(tmp / "p.jsonl").write_text("".join(json.dumps({{"problem": f"Soak problem {{i}}: what is ${{i}}+1$?",
                                                   "answer": str(i + 1), "unique_id": f"soak/{{i}}"}}) + "\\n"
                                     for i in range({solutions} // 4)))
import_problems(tmp / "p.jsonl", campaign)
(tmp / "s.jsonl").write_text("".join(json.dumps({{"problem_id": f"soak/{{i % ({solutions} // 4)}}",
    "steps": [f"Step {{k}}: we have $x_{{k}} = {{k}}$." for k in range({steps} - 1)]
             + [f"# Answer\\n\\n{{i % ({solutions} // 4) + 1}}"]}}) + "\\n"
    for i in range({solutions})))
import_solutions(tmp / "s.jsonl", campaign)
User = get_user_model()
for n in range({users}):
    user = User.objects.create_user(f"soak{{n}}", password="{PASSWORD}")
    Membership.objects.create(campaign=campaign, user=user, role=Role.LABELER, passed_screening=True)
"""
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--solutions", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--gunicorn-workers", type=int, default=5)
    parser.add_argument("--database-url", default=os.environ.get("SOAK_DATABASE_URL",
                                                                 "postgres://postgres@127.0.0.1:5432/steplab_soak"))
    parser.add_argument("--redis-url", default=os.environ.get("SOAK_REDIS_URL", "redis://127.0.0.1:6379/12"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import psycopg

    name = args.database_url.rsplit("/", 1)[-1]
    with psycopg.connect(args.database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    media = Path(tempfile.mkdtemp(prefix="soak-media-"))
    env = dict(os.environ, DATABASE_URL=args.database_url, REDIS_URL=args.redis_url, DB_CONN_MAX_AGE="60",
               DJANGO_SETTINGS_MODULE="steplab.settings_production", SECURE_SSL_REDIRECT="false",
               SECRET_KEY="soak-secret-key-not-for-production-0123456789abcdefghijklmnopqrstuvwxyz",
               ALLOWED_HOSTS="127.0.0.1,localhost", MEDIA_ROOT=str(media), STEPLAB_LOGIN_RATE="100000/m",
               STATIC_ROOT=str(media / "static"),
               # plain HTTP on loopback: the production settings' HTTPS-only cookies would never be sent back
               SESSION_COOKIE_SECURE="false", CSRF_COOKIE_SECURE="false")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                   check=True)
    subprocess.run(["redis-cli", "-u", args.redis_url, "flushdb"], check=False, capture_output=True)
    started = time.perf_counter()
    _setup(env, args.users, args.solutions, args.steps)
    print(f"setup: {args.solutions} solutions x {args.steps} steps, {args.users} labelers in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "steplab.wsgi:application", "--bind",
                               f"127.0.0.1:{PORT}", "--workers", str(args.gunicorn_workers), "--threads", "4",
                               "--log-level", "warning"], cwd=ROOT, env=env)
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "steplab", "worker", "-B", "-c", "1",
                               "-Q", "default", "-l", "WARNING", "-s", str(media / "beat-schedule")], cwd=ROOT, env=env)
    try:
        wait_until_healthy(BASE, attempts=60, pause_s=1)  # best effort: the soak starts either way, as it always has
        stats = Stats()
        deadline = time.time() + args.duration
        threads = [threading.Thread(target=labeler, args=(n, "soak", deadline, stats, args.seed), daemon=True)
                   for n in range(args.users)]
        load_started = time.perf_counter()
        for thread in threads:
            thread.start()
        snapshots_sent = 0
        from celery import Celery

        sender = Celery(broker=args.redis_url)
        while any(t.is_alive() for t in threads):
            if time.time() < deadline and (time.perf_counter() - load_started) >= 60 * snapshots_sent:
                campaign_id = int(subprocess.run(
                    ["psql", args.database_url, "-tAc", "SELECT id FROM annotate_campaign WHERE slug='soak'"],
                    capture_output=True, text=True).stdout.strip())
                sender.send_task("rewards.snapshot_dataset", args=[campaign_id])
                snapshots_sent += 1
            time.sleep(1)
        elapsed = time.perf_counter() - load_started
    finally:
        server.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        worker.wait(timeout=120)
    audit = _audit(args.database_url, stats.acknowledged)
    total = sum(len(v) for v in stats.latency.values())
    print(f"load: {args.users} labelers for {elapsed:.0f} s: {total} requests, {total / elapsed:.1f} requests/s, "
          f"{sum(stats.errors.values())} errors")
    per_endpoint = {}
    for endpoint, values in sorted(stats.latency.items()):
        figures = {"count": len(values), "errors": stats.errors.get(endpoint, 0),
                   "p50_ms": round(1000 * statistics.median(values), 1),
                   "p95_ms": round(1000 * percentile(values, 0.95), 1),
                   "p99_ms": round(1000 * percentile(values, 0.99), 1)}
        per_endpoint[endpoint] = figures
        print(f"  {endpoint:10s} n={figures['count']:7d} p50={figures['p50_ms']:7.1f} ms "
              f"p95={figures['p95_ms']:7.1f} ms p99={figures['p99_ms']:7.1f} ms errors={figures['errors']}")
    print(f"audit: {audit['acknowledged']} acknowledged ratings, {audit['missing']} missing, "
          f"{audit['wrong_value']} with another value, {audit['duplicates']} duplicated; "
          f"dataset versions written during the load: {audit['dataset_versions']}")
    print(json.dumps({"users": args.users, "seconds": round(elapsed), "requests": total,
                      "requests_per_s": round(total / elapsed, 1), "errors": sum(stats.errors.values()),
                      "endpoints": per_endpoint, **audit}))


def _audit(database_url: str, acknowledged: dict[tuple[int, int], int]) -> dict[str, int]:
    import psycopg

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT r.assignment_id, s.index, r.rating, count(*) OVER (PARTITION BY r.assignment_id, s.index) "
            "FROM annotate_rating r JOIN annotate_completion c ON c.id = r.completion_id "
            "JOIN annotate_step s ON s.id = c.step_id").fetchall()
        versions = conn.execute("SELECT count(*) FROM rewards_datasetversion WHERE status = 'ready'").fetchone()[0]
    stored = {(a, i): (r, n) for a, i, r, n in rows}
    missing = sum(1 for key in acknowledged if key not in stored)
    wrong = sum(1 for key, value in acknowledged.items() if key in stored and stored[key][0] != value)
    duplicates = sum(1 for key in acknowledged if key in stored and stored[key][1] > 1)
    return {"acknowledged": len(acknowledged), "missing": missing, "wrong_value": wrong, "duplicates": duplicates,
            "dataset_versions": int(versions)}


if __name__ == "__main__":
    main()

"""Import/export benchmark: a PRM800K-shaped file of 100,000 solutions / 1,000,000 step ratings on PostgreSQL,
or of 20,000 solutions / 200,000 step ratings on the embedded default (SQLite).

    .venv/bin/python bench/import_export.py [--database postgresql|sqlite] [--solutions N] [--steps 10]
                                            [--database-url URL]

Generates the file, then runs `manage.py import_prm800k` and `manage.py export_dataset --format prm800k` as
child processes (each timed, with its own peak RSS from wait4), on a fresh database (PostgreSQL: default
steplab_bench on 127.0.0.1; SQLite: a new file in a temporary folder, WAL as the embedded default runs it).
Targets on the 2-core machine: PostgreSQL import <= 45 s for 1M ratings, SQLite import <= 20 s per 20,000
solutions (what PostgreSQL took before the import's writes were reworked); export <= 30 s; peak RSS <= 400 MB.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generate(path: Path, solutions: int, steps: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    ratings = 0
    with path.open("w", encoding="utf-8") as out:
        for number in range(solutions):
            problem = number // 10
            step_rows = []
            # Exactly `steps` ratings per solution (100k x 10 = 1M): 30% of the solutions end on a -1 last step.
            first_error = steps - 1 if rng.random() < 0.3 else -1
            for index in range(steps):
                rating = -1 if index == first_error else rng.choice((0, 1, 1, 1))
                text = f"Step {index} of sample {number}: $x_{index} = {rng.random():.6f}$"
                step_rows.append({"completions": [{"text": text, "rating": rating, "flagged": False}],
                                  "human_completion": None, "chosen_completion": None})
                ratings += 1
            row = {
                "labeler": f"{rng.randrange(200):08x}-0000-4000-8000-000000000000",
                "timestamp": "2022-08-01T12:00:00.000000",
                "generation": 1 + number % 10, "is_quality_control_question": False,
                "is_initial_screening_question": False,
                "question": {"problem": f"Benchmark problem {problem}: compute $\\frac{{{problem}}}{{7}}$.",
                             "ground_truth_answer": f"\\frac{{{problem}}}{{7}}",
                             "pre_generated_steps": [s["completions"][0]["text"] for s in step_rows],
                             "pre_generated_answer": "1", "pre_generated_verifier_score": rng.random()},
                "label": {"steps": step_rows, "total_time": rng.randrange(10_000, 600_000),
                          "finish_reason": ("found_error" if step_rows[-1]["completions"][0]["rating"] == -1
                                            else "solution")},
            }
            out.write(json.dumps(row) + "\n")
    return ratings


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system) of one child process. The CPU time is the
    figure to compare when the machine is shared: wall time then mostly measures the others' load."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


class ServerCpu(threading.Thread):
    """CPU seconds of the PostgreSQL backends serving the import (read from /proc while it runs: the server is on
    this machine). With the client's CPU time it says what the import costs whatever the others' load."""

    def __init__(self, database_url: str) -> None:
        super().__init__(daemon=True)
        self.name_of_database = database_url.rsplit("/", 1)[-1]
        self.admin_url = database_url.rsplit("/", 1)[0] + "/postgres"
        self.seconds: float | None = None
        self.done = threading.Event()

    def run(self) -> None:
        import psycopg

        ticks = os.sysconf("SC_CLK_TCK")
        by_backend: dict[int, float] = {}  # the import's connection and its read-ahead thread's
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self.done.wait(0.2):
                for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                           [self.name_of_database]).fetchall():
                    try:
                        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    by_backend[pid] = (int(fields[11]) + int(fields[12])) / ticks
                    self.seconds = sum(by_backend.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--solutions", type=int, default=None,
                        help="solutions in the file (default: 100,000 on PostgreSQL, 20,000 on SQLite)")
    parser.add_argument("--steps", type=int, default=10, help="steps per solution (before a first error stops it)")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL",
                                                                 "postgres://postgres@127.0.0.1:5432/steplab_bench"))
    args = parser.parse_args()
    if args.solutions is None:
        args.solutions = 100_000 if args.database == "postgresql" else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url if args.database == "postgresql" else f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        env = dict(os.environ, DATABASE_URL=url, DB_CONN_MAX_AGE="0")
        env.pop("REDIS_URL", None)
        if args.database == "postgresql":
            fresh_postgresql_database(url)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        result = run(args, env, Path(tmp))
    print(json.dumps(result))


def fresh_postgresql_database(url: str) -> None:
    name = url.rsplit("/", 1)[-1]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def run(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> dict[str, object]:
    python = sys.executable
    print(f"database: {args.database}", flush=True)
    source, exported = tmp / "bench.jsonl", tmp / "export.jsonl"
    started = time.perf_counter()
    ratings = generate(source, args.solutions, args.steps)
    print(f"generated {args.solutions} solutions / {ratings} step ratings "
          f"({source.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s", flush=True)
    load = os.getloadavg()[0]
    server = ServerCpu(env["DATABASE_URL"]) if args.database == "postgresql" else None
    if server is not None:
        server.start()
    import_s, import_rss, import_cpu = timed([python, "manage.py", "import_prm800k", str(source), "--campaign",
                                              "bench"], env)
    if server is not None:
        server.done.set()
        server.join()
    print(f"import: {import_s:.1f} s, peak RSS {import_rss:.0f} MB", flush=True)
    export_s, export_rss, _ = timed([python, "manage.py", "export_dataset", "--campaign", "bench", "--format",
                                     "prm800k", "--out", str(exported)], env)
    print(f"export: {export_s:.1f} s, peak RSS {export_rss:.0f} MB", flush=True)
    same = sum(1 for _ in exported.open()) == args.solutions
    import_target = 45 if args.database == "postgresql" else 20 * args.solutions / 20_000
    return {"solutions": args.solutions, "step_ratings": ratings, "import_s": round(import_s, 1),
            "export_s": round(export_s, 1), "import_peak_rss_mb": round(import_rss),
            "export_peak_rss_mb": round(export_rss),
            "rows_exported_match": same, "database": args.database, "import_client_cpu_s": round(import_cpu, 1),
            "import_server_cpu_s": None if server is None or server.seconds is None else round(server.seconds, 1),
            "load_1m_before_import": round(load, 1),
            "targets_met": import_s <= import_target and export_s <= 30 and max(import_rss, export_rss) <= 400}


if __name__ == "__main__":
    main()

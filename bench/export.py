"""Dataset-version benchmark: a campaign of 1,000,000 step ratings exported in every format, and a 1 GB download.

    .venv/bin/python bench/export.py [--solutions 100000] [--steps 10] [--database-url URL] [--download-gb 1]

Builds the campaign on a fresh database (default steplab_bench_export on 127.0.0.1) with
`manage.py import_prm800k` (PostgreSQL COPY underneath) from the PRM800K-shaped file of
bench/import_export.py, grades a third of the solutions correct (one UPDATE, so the outcome format has
rows), then times `manage.py snapshot_dataset` — PRM800K JSONL, TRL stepwise JSONL + Parquet, outcome
JSONL + Parquet, README card, all hashed and published to storage — as a child process with its own
peak RSS (wait4). Then a child process streams a 1 GB dataset file through the download endpoint
(Django's request path, session-less token auth) and reports how much its RSS grew.
Targets on the 2-core machine: export <= 60 s, peak RSS <= 400 MB; download RSS growth flat (< 50 MB).
Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _import_bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_import_export", ROOT / "bench" / "import_export.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def download_child(gigabytes: float) -> None:
    """Runs in its own process: a big file behind a DatasetVersion, streamed through the API view."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.storage import default_storage
    from django.test import Client

    from annotate.models import Campaign, Membership, Role
    from api.services import create_token
    from rewards.models import DatasetVersion

    size = int(gigabytes * 1024**3)
    name = "datasets/bench/big/blob.jsonl"
    path = Path(default_storage.path(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    block = (b'{"x": "' + b"y" * 1000 + b'"}\n') * 1024
    with path.open("wb") as handle:
        written = 0
        while written < size:
            handle.write(block[: size - written])
            written += min(len(block), size - written)
    campaign = Campaign.objects.get(slug="bench")
    user = get_user_model().objects.create_user("bench-researcher")
    Membership.objects.create(campaign=campaign, user=user, role=Role.RESEARCHER)
    version = DatasetVersion.objects.create(campaign=campaign, number=9999, status="ready", content_sha256="0" * 64,
                                            folder="datasets/bench/big",
                                            files={"blob": {"name": name, "sha256": "0" * 64, "bytes": size,
                                                            "rows": 0}})
    _, raw = create_token(user, name="bench", scope="read")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    warm = client.get(f"/api/datasets/{version.pk}/files/blob/", HTTP_RANGE="bytes=0-1023")  # imports, URL cache
    assert warm.status_code == 206 and len(b"".join(warm.streaming_content)) == 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    response = client.get(f"/api/datasets/{version.pk}/files/blob/")
    received = sum(len(chunk) for chunk in response.streaming_content)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path.unlink()
    print(json.dumps({"bytes": received, "ok": received == size and response.status_code == 200,
                      "seconds": seconds, "rss_before_mb": before, "rss_after_mb": after}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--download-gb", type=float, default=1.0)
    parser.add_argument("--download-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default=os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/steplab_bench_export"))
    args = parser.parse_args()
    if args.download_child:
        download_child(args.download_gb)
        return
    bench = _import_bench()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, DATABASE_URL=args.database_url, DB_CONN_MAX_AGE="0", MEDIA_ROOT=f"{tmp}/media",
                   STEPLAB_EXPORT_TMP_DIR=f"{tmp}/export-tmp")
        env.pop("REDIS_URL", None)
        name = args.database_url.rsplit("/", 1)[-1]
        import psycopg

        with psycopg.connect(args.database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        python = sys.executable
        subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        source = Path(tmp) / "bench.jsonl"
        ratings = bench.generate(source, args.solutions, args.steps)  # type: ignore[attr-defined]
        started = time.perf_counter()
        subprocess.run([python, "manage.py", "import_prm800k", str(source), "--campaign", "bench"], cwd=ROOT, env=env,
                       check=True, stdout=subprocess.DEVNULL)
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute("UPDATE annotate_solution SET is_correct = (id % 3 = 0)")
        print(f"built: {args.solutions} solutions / {ratings} step ratings in {time.perf_counter() - started:.1f} s",
              flush=True)
        export_s, export_rss, export_cpu = bench.timed(  # type: ignore[attr-defined]
            [python, "manage.py", "snapshot_dataset", "--campaign", "bench"], env)
        files = sorted(Path(tmp, "media").rglob("*.*"))
        total_mb = sum(f.stat().st_size for f in files) / 1e6
        print(f"export: {ratings} step ratings, all formats ({len(files)} files, {total_mb:.0f} MB) "
              f"in {export_s:.1f} s, peak RSS {export_rss:.0f} MB", flush=True)
        child = subprocess.run([python, str(Path(__file__).resolve()), "--download-child", "--download-gb",
                                str(args.download_gb)], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        download = json.loads(child.stdout.strip().splitlines()[-1])
        growth = download["rss_after_mb"] - download["rss_before_mb"]
        print(f"download: {download['bytes'] / 1024**3:.2f} GB streamed in {download['seconds']:.1f} s, "
              f"server RSS {download['rss_before_mb']:.0f} -> {download['rss_after_mb']:.0f} MB "
              f"(growth {growth:.0f} MB)", flush=True)
    result = {"step_ratings": ratings, "export_s": round(export_s, 1), "export_cpu_s": round(export_cpu, 1),
              "export_peak_rss_mb": round(export_rss),
              "files": len(files), "files_mb": round(total_mb), "download_gb": round(download["bytes"] / 1024**3, 2),
              "download_ok": download["ok"], "download_rss_growth_mb": round(growth),
              "targets_met": export_s <= 60 and export_rss <= 400 and growth < 50 and download["ok"]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()

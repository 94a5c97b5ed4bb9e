"""Outbound benchmark: how long a trickling webhook receiver holds a worker, and whether an import waits on it.

    .venv/bin/python bench/outbound.py [--hooks 3] [--webhook-queue webhooks] [--deadline 10]

Runs the embedded default as ``./run demo`` sets it up (a fresh SQLite database and filesystem broker in a
temporary folder, one worker process per queue of ``steplab.celery.WORKER_QUEUES``, concurrency 1). A receiver
on 127.0.0.1 (admitted by STEPLAB_WEBHOOK_ALLOWED_HOSTS) sends its answer one byte a second and would take
minutes to finish. First a small problems import runs alone (the baseline); then ``--hooks`` deliveries to the
trickling receiver are queued and the same import starts right behind them. Figures: each delivery's time on its
worker (the attempt's own log: from the claim to the recorded failure; target <= 15 s), the import's time
alone and behind the slow deliveries (target: no longer than alone plus noise). ``--webhook-queue default``
puts deliveries back on the shared queue, as before, to show what the split buys.
Last line: one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_HELD_S = 15.0


def trickling_receiver() -> tuple[int, list[float]]:
    """A server answering one byte a second, for minutes; returns its port and each connection's held seconds."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[float] = []

    def handle(conn: socket.socket) -> None:
        started = time.monotonic()
        try:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Pad: " + b"x" * 600:
                conn.sendall(bytes([byte]))
                time.sleep(1.0)
        except OSError:
            pass
        finally:
            held.append(time.monotonic() - started)
            conn.close()

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hooks", type=int, default=3, help="slow deliveries queued ahead of the import")
    parser.add_argument("--webhook-queue", default="webhooks", help="STEPLAB_WEBHOOK_QUEUE for this run")
    parser.add_argument("--deadline", type=float, default=10.0, help="STEPLAB_WEBHOOK_TIMEOUT_S for this run")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="steplab-outbound-bench-"))
    os.environ.pop("REDIS_URL", None)
    os.environ.update(DATABASE_URL=f"sqlite:///{folder / 'bench.sqlite3'}", STEPLAB_VAR_DIR=str(folder),
                      DJANGO_SETTINGS_MODULE="steplab.settings", STEPLAB_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
                      STEPLAB_WEBHOOK_QUEUE=args.webhook_queue, STEPLAB_WEBHOOK_TIMEOUT_S=str(args.deadline),
                      STEPLAB_WEBHOOK_MAX_ATTEMPTS="1", HF_HUB_OFFLINE="1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.db import transaction

    from annotate.models import Campaign, ImportJob
    from annotate.services.campaigns import create_import_job
    from steplab.celery import WORKER_QUEUES, worker_command
    from webhooks.models import Delivery, Event, Webhook
    from webhooks.services import emit, register_webhook

    call_command("migrate", verbosity=0)
    port, held = trickling_receiver()
    log = open(folder / "workers.log", "w")  # noqa: SIM115 — the workers write to it until they stop
    workers = [subprocess.Popen(worker_command(queue, concurrency=1, node=f"bench{os.getpid()}",
                                               options=("-l", "WARNING")), cwd=ROOT, env=dict(os.environ),
                                stdout=log, stderr=subprocess.STDOUT)
               for queue in WORKER_QUEUES if queue != "gpu"]
    try:
        boss = get_user_model().objects.create_user("bench-boss", is_staff=True, is_superuser=True)
        campaign = Campaign.objects.create(slug="outbound-bench", name="Outbound bench")
        rows = "".join(json.dumps({"problem": f"What is {n}+{n}?", "answer": str(2 * n)}) + "\n" for n in range(50))

        def timed_import(name: str) -> float:
            started = time.monotonic()
            job = create_import_job(campaign, kind="problems", user=boss,
                                    upload=SimpleUploadedFile(f"{name}.jsonl", rows.replace("What", name).encode()))
            while not ImportJob.objects.get(pk=job.pk).is_finished:
                if time.monotonic() - started > 600:
                    raise SystemExit("the import did not finish within 600 s")
                time.sleep(0.1)
            return time.monotonic() - started

        alone_s = timed_import("Alone")  # also waits for the workers to come up
        alone_s = timed_import("Again")
        for number in range(args.hooks):
            register_webhook(campaign=campaign, url=f"http://127.0.0.1:{port}/hook/{number}",
                             events=[Event.JOB_FAILED], user=boss)
        with transaction.atomic():
            emit(campaign_id=campaign.pk, event=Event.JOB_FAILED, data={"bench": True})
        time.sleep(1.0)  # the deliveries reach their worker first
        behind_s = timed_import("Behind")
        waited = time.monotonic()
        while Delivery.objects.filter(status=Delivery.Status.PENDING).exists():
            if time.monotonic() - waited > 60 + args.hooks * (args.deadline + 5):
                raise SystemExit("the deliveries did not end")
            time.sleep(0.2)
        attempt_s = [entry["ms"] / 1000 for d in Delivery.objects.all() for entry in d.attempts_log]
        errors = sorted({d.last_error for d in Delivery.objects.all()})
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
        log.close()
    figures = {
        "webhook_queue": args.webhook_queue, "deadline_s": args.deadline, "hooks": args.hooks,
        "held_s_max": round(max(attempt_s), 2), "receiver_held_s_max": round(max(held), 2) if held else None,
        "target_held_s": TARGET_HELD_S, "import_alone_s": round(alone_s, 2), "import_behind_webhooks_s": round(
            behind_s, 2), "delivery_errors": errors, "hooks_registered": Webhook.objects.count(),
    }
    figures["held_ok"] = figures["held_s_max"] <= TARGET_HELD_S
    print(f"a trickling receiver held a worker {figures['held_s_max']} s at most (target <= {TARGET_HELD_S} s); "
          f"an import took {figures['import_alone_s']} s alone, {figures['import_behind_webhooks_s']} s behind "
          f"{args.hooks} slow deliveries on queue {args.webhook_queue!r}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

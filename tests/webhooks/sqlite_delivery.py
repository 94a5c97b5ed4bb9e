"""The SQLite half of tests/webhooks/test_outbound.py, run in a process of its own on a fresh embedded database
(DATABASE_URL=sqlite:///…, STEPLAB_VAR_DIR for the filesystem broker). The receiver takes the database's write lock
while the delivery waits on it (it can: the delivery holds no transaction) and keeps it past the busy timeout,
so the delivery cannot record its answer; the sweep then sends it again and the second attempt records it.
Prints one JSON line with what happened."""
from __future__ import annotations

import json
import socket
import sqlite3
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK_HELD_S = 4.0

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import OperationalError
    from django.utils import timezone

    from tests.factories import CampaignFactory
    from tests.webhooks.receivers import RawReceiver, Visit, send_all
    from webhooks.models import Delivery, Event, Webhook
    from webhooks.services import SWEEP_GRACE_S, attempt_delivery, sweep_deliveries

    # A short busy timeout (the embedded default waits 20 s): the lock below outlasts it sooner.
    settings.DATABASES["default"]["OPTIONS"]["timeout"] = 1
    call_command("migrate", verbosity=0)
    database = settings.DATABASES["default"]["NAME"]
    writes: list[str] = []

    def lock_then_answer(conn: socket.socket, visit: Visit) -> None:
        if writes:  # the second attempt: answer at once
            send_all(conn, visit, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return
        other = sqlite3.connect(database, timeout=5, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("UPDATE webhooks_webhook SET events = events")
            writes.append("locked")
            send_all(conn, visit, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            time.sleep(LOCK_HELD_S)
            other.execute("COMMIT")
            writes.append("committed")
        except sqlite3.OperationalError as error:
            writes.append(str(error))
        finally:
            other.close()

    receiver = RawReceiver(lock_then_answer)
    hook = Webhook.objects.create(campaign=CampaignFactory(slug="embedded"), url=f"{receiver.url}/hook",
                                  events=[Event.JOB_FAILED], secret="whsec_test")
    delivery = Delivery.objects.create(webhook=hook, event=Event.JOB_FAILED, payload={"event": "job.failed"})
    try:
        attempt_delivery(delivery.pk)
        first = "recorded"
    except OperationalError as error:
        first = str(error)
    receiver.visits[0].done.wait(30)
    later = timezone.now() + timedelta(seconds=settings.STEPLAB_WEBHOOK_TIMEOUT_S + SWEEP_GRACE_S + 1)
    swept = sweep_deliveries(now=later)
    if swept == [delivery.pk]:
        attempt_delivery(delivery.pk)  # what the worker does with the task the sweep sent
    delivery.refresh_from_db()
    print(json.dumps({"concurrent_write": writes, "first_attempt": first, "swept": swept == [delivery.pk],
                      "status": delivery.status, "attempts": delivery.attempts, "visits": len(receiver.visits)}))

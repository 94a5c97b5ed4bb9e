"""The SQLite half of tests/webhooks/test_outbound.py, run in a process of its own on a fresh embedded database
(DATABASE_URL=sqlite:///…): a receiver that writes to the database while the delivery waits on it. Prints one
JSON line: whether that write committed, and the delivery's status and attempts."""
from __future__ import annotations

import json
import socket
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from tests.factories import CampaignFactory
    from tests.webhooks.receivers import RawReceiver, Visit, send_all
    from webhooks.models import Delivery, Event, Webhook
    from webhooks.services import attempt_delivery

    call_command("migrate", verbosity=0)
    database = settings.DATABASES["default"]["NAME"]
    writes: list[str] = []

    def write_then_answer(conn: socket.socket, visit: Visit) -> None:
        other = sqlite3.connect(database, timeout=5)
        try:
            with other:
                other.execute("UPDATE webhooks_webhook SET events = events")
            writes.append("committed")
        except sqlite3.OperationalError as error:
            writes.append(str(error))
        finally:
            other.close()
        send_all(conn, visit, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    receiver = RawReceiver(write_then_answer)
    hook = Webhook.objects.create(campaign=CampaignFactory(slug="embedded"), url=f"{receiver.url}/hook",
                                  events=[Event.JOB_FAILED], secret="whsec_test")
    delivery = Delivery.objects.create(webhook=hook, event=Event.JOB_FAILED, payload={"event": "job.failed"})
    try:
        attempt_delivery(delivery.pk)
    except Exception as error:  # noqa: BLE001 — the parent test reports what the old code raised
        print(f"attempt raised {type(error).__name__}: {error}", file=sys.stderr)
    delivery.refresh_from_db()
    print(json.dumps({"concurrent_write": writes[0] if writes else "none", "status": delivery.status,
                      "attempts": delivery.attempts}))

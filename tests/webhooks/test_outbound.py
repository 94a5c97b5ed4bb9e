"""Outbound requests (stepcore/outbound.py) as webhooks make them: a URL cannot be aimed inward (a backslash, a name
resolving to loopback), the form never says what a name resolves to, a receiver cannot hold a worker (a byte a
second is cut off at the deadline, a huge answer is read only up to the cap), redirects are not followed, no
database transaction stays open while the receiver is waited on (PostgreSQL and SQLite), a delivery whose worker
died is sent again by the sweep, and stored hooks the rules refuse are turned off with the reason.

Receivers are real TCP servers on 127.0.0.1 (tests/webhooks/receivers.py), admitted by
STEPLAB_WEBHOOK_ALLOWED_HOSTS where a test needs them reached."""
from __future__ import annotations

import importlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.apps import apps
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from annotate.models import Role
from stepcore import outbound
from tests.factories import PASSWORD
from tests.waiting import wait_for
from tests.webhooks.receivers import RawReceiver, Visit, fixed, huge, send_all, trickle
from webhooks.models import Delivery, Event, Webhook
from webhooks.services import (
    DELIVERY_HEADER,
    SWEEP_GRACE_S,
    WebhookRefused,
    attempt_delivery,
    check_receiver_url,
    sweep_deliveries,
)

ROOT = Path(__file__).resolve().parents[2]
BACKSLASH = "http://127.0.0.1:{port}\\@1.1.1.1/"


@pytest.fixture
def receivers() -> Iterator[list[RawReceiver]]:
    started: list[RawReceiver] = []
    yield started
    for receiver in started:
        receiver.close()


def _admin_client(campaign, member) -> Client:
    client = Client()
    assert client.login(username=member(campaign, "hook-admin", Role.ADMIN).username, password=PASSWORD)
    return client


def _stored_hook(campaign, url: str) -> Webhook:
    # A hook stored before today's rules (or written by hand): registration would refuse it, the send must too.
    return Webhook.objects.create(campaign=campaign, url=url, events=[Event.JOB_FAILED], secret="whsec_test")


def _delivery(hook: Webhook) -> Delivery:
    return Delivery.objects.create(webhook=hook, event=Event.JOB_FAILED, payload={"event": "job.failed"})


@pytest.mark.django_db
def test_the_backslash_url_is_refused_at_registration(campaign_factory, member, settings, receivers) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    receivers.append(RawReceiver(fixed("200 OK")))
    campaign = campaign_factory("slash")
    url = BACKSLASH.format(port=receivers[0].port)
    with pytest.raises(WebhookRefused, match="backslash") as refused:
        check_receiver_url(url)
    assert refused.value.field == "url"
    page = _admin_client(campaign, member).post(f"/manage/c/{campaign.slug}/webhooks/",
                                                {"url": url, "events": [Event.JOB_FINISHED]})
    assert page.status_code == 400 and b"backslash" in page.content
    assert not Webhook.objects.exists() and not receivers[0].visits


@pytest.mark.django_db(transaction=True)
def test_the_backslash_url_is_refused_at_send(campaign_factory, settings, receivers) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    receivers.append(RawReceiver(fixed("404 Not Found", body=b"<h1>Steplab internal page</h1>")))
    delivery = _delivery(_stored_hook(campaign_factory("slash2"), BACKSLASH.format(port=receivers[0].port)))
    assert attempt_delivery(delivery.pk) is True  # an error, attempts left
    delivery.refresh_from_db()
    assert "backslash" in delivery.last_error and delivery.last_status_code is None
    assert "internal" not in delivery.last_error and "refused" not in delivery.last_error.lower()
    assert not receivers[0].visits  # nothing reached the loopback receiver


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://user:pw@example.com/hook", "http://example.com@127.0.0.1/",
                                 "http://exa mple.com/", "http://example.com/\x00", "gopher://example.com/",
                                 "http://[::ffff:127.0.0.1]/", "http://0x7f.1/", "http://2130706433/",
                                 "http://[::1]/hook", "http://169.254.169.254/latest/meta-data",
                                 "http://127.0.0.%31/", "http://1.1.1.1&@127.0.0.1/", "http://[::ffff:7f00:1]/"])
def test_urls_that_aim_inward_or_confuse_parsers_are_refused(settings, url: str) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(WebhookRefused):
        check_receiver_url(url)


@pytest.mark.django_db
def test_a_name_resolving_to_loopback_is_refused_and_the_form_does_not_say_where_it_points(
        campaign_factory, member, settings) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    campaign = campaign_factory("names")
    addresses = {str(info[4][0]) for info in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)}
    page = _admin_client(campaign, member).post(f"/manage/c/{campaign.slug}/webhooks/",
                                                {"url": "http://localhost:8000/hook", "events": [Event.JOB_FAILED]})
    assert page.status_code == 400 and b"private, loopback or link-local" in page.content
    assert addresses and not any(address.encode() in page.content for address in addresses)
    assert not Webhook.objects.exists()


@pytest.mark.django_db
def test_an_allowed_cidr_admits_its_addresses_only(settings) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["10.20.0.0/16"]
    assert check_receiver_url("http://10.20.3.4:8080/x").address == "10.20.3.4"
    with pytest.raises(WebhookRefused, match="STEPLAB_WEBHOOK_ALLOWED_HOSTS"):
        check_receiver_url("http://10.21.3.4/x")


def test_the_request_goes_to_the_checked_address_without_a_second_lookup(receivers) -> None:
    """The target names a host that resolves nowhere: only a connection to the checked address can succeed."""
    receivers.append(RawReceiver(fixed("204 No Content")))
    target = outbound.Target(scheme="http", host="rebound.invalid", port=receivers[0].port, request_uri="/hook",
                             address="127.0.0.1", public=False)
    rules = outbound.Rules(allowed=(), deadline_s=5.0, max_answer_bytes=1024, setting="TEST")
    answer = outbound.post(target, body=b"{}", headers={}, rules=rules)
    assert answer.status == 204
    assert f"Host: rebound.invalid:{receivers[0].port}".encode() in receivers[0].visits[0].request


def _tls_receiver(tmp_path: Path, name: str) -> tuple[int, str, list[bytes]]:
    """A TLS server on 127.0.0.1 with a certificate for ``name`` only; its port, CA file and requests."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = timezone.now()
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server = socket.create_server(("127.0.0.1", 0))
    requests: list[bytes] = []

    def serve() -> None:
        while True:
            raw, _ = server.accept()
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    data = b""
                    while not data.endswith(b"{}"):
                        data += conn.recv(65536)
                    requests.append(data)
                    conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
                    conn.recv(1)  # until the client closes: no reset under its read
            except OSError:
                continue

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1], str(cert_file), requests


def test_tls_checks_the_name_over_the_connection_to_the_checked_address(tmp_path: Path) -> None:
    port, ca_file, requests = _tls_receiver(tmp_path, "hooks.test")
    rules = outbound.Rules(allowed=(), deadline_s=5.0, max_answer_bytes=1024, setting="TEST", ca_certs=ca_file)
    target = outbound.Target(scheme="https", host="hooks.test", port=port, request_uri="/in", address="127.0.0.1",
                             public=False)
    assert outbound.post(target, body=b"{}", headers={}, rules=rules).status == 201
    assert f"Host: hooks.test:{port}".encode() in requests[0]
    other_name = outbound.Target(scheme="https", host="other.test", port=port, request_uri="/in",
                                 address="127.0.0.1", public=False)
    public_bundle = outbound.Rules(allowed=(), deadline_s=5.0, max_answer_bytes=1024, setting="TEST")
    for wrong, wrong_rules in ((other_name, rules), (target, public_bundle)):
        with pytest.raises(outbound.OutboundFailed, match="^The receiver's TLS certificate is not valid"):
            outbound.post(wrong, body=b"{}", headers={}, rules=wrong_rules)
    assert len(requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_trickling_receiver_is_cut_off_at_the_deadline(campaign_factory, settings, receivers) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STEPLAB_WEBHOOK_TIMEOUT_S = 3.0
    settings.STEPLAB_WEBHOOK_MAX_ATTEMPTS = 1
    receivers.append(RawReceiver(trickle(every_s=1.0, pad=40)))
    delivery = _delivery(_stored_hook(campaign_factory("slow"), f"{receivers[0].url}/hook"))
    assert attempt_delivery(delivery.pk) is False
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.FAILED and delivery.last_status_code is None
    assert delivery.last_error == "No complete answer within the deadline of 3 s."
    visit = receivers[0].visits[0]
    assert visit.done.wait(10) and visit.cut_off and visit.sent < 20  # the whole answer is over 60 bytes


@pytest.mark.django_db(transaction=True)
def test_a_huge_answer_is_not_read_beyond_the_cap(campaign_factory, settings, receivers) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    total = 200 * 1024 * 1024  # far beyond the cap and any socket buffer between the two ends
    receivers.append(RawReceiver(huge(total)))
    delivery = _delivery(_stored_hook(campaign_factory("big"), f"{receivers[0].url}/hook"))
    assert attempt_delivery(delivery.pk) is False
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED and delivery.last_status_code == 200
    visit = receivers[0].visits[0]
    assert visit.done.wait(30) and visit.cut_off and visit.sent < total // 4


@pytest.mark.django_db(transaction=True)
def test_redirects_are_not_followed(campaign_factory, settings, receivers) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    receivers.append(RawReceiver(fixed("200 OK")))
    receivers.append(RawReceiver(fixed("307 Temporary Redirect",
                                       headers=f"Location: {receivers[0].url}/inside\r\n", body=b"moved")))
    delivery = _delivery(_stored_hook(campaign_factory("redirect"), f"{receivers[1].url}/hook"))
    assert attempt_delivery(delivery.pk) is True
    delivery.refresh_from_db()
    assert delivery.last_status_code == 307 and delivery.last_error == "HTTP 307 (redirects are not followed)"
    assert len(receivers[1].visits) == 1 and not receivers[0].visits  # "moved" not quoted: 127.0.0.1 is internal


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_the_receiver_is_waited_on(campaign_factory, settings, receivers) -> None:
    """While the receiver holds the request, another connection locks the delivery's row without waiting."""
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    db = django_settings.DATABASES["default"]
    locked: list[str] = []

    def lock_then_answer(conn: socket.socket, visit: Visit) -> None:
        delivery_id = json.loads(visit.request.partition(b"\r\n\r\n")[2])["delivery"]
        with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                             dbname=db["NAME"], password=db.get("PASSWORD") or None) as other:
            try:
                other.execute("SELECT id FROM webhooks_delivery WHERE id = %s FOR UPDATE NOWAIT", [delivery_id])
                locked.append("free")
            except psycopg.errors.LockNotAvailable:
                locked.append("held by the delivery")
        send_all(conn, visit, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    receivers.append(RawReceiver(lock_then_answer))
    delivery = _delivery(_stored_hook(campaign_factory("locks"), f"{receivers[0].url}/hook"))
    assert attempt_delivery(delivery.pk) is False
    delivery.refresh_from_db()
    assert locked == ["free"] and delivery.status == Delivery.Status.DELIVERED


def test_on_sqlite_a_write_during_the_request_succeeds_and_a_delivery_it_blocks_is_swept(tmp_path: Path) -> None:
    """The embedded default: while the delivery waits on the receiver, the receiver takes the database's write
    lock (nothing holds it) and keeps it until the delivery cannot record its answer; the sweep sends it again."""
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'embedded.sqlite3'}", STEPLAB_VAR_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="steplab.settings", STEPLAB_WEBHOOK_ALLOWED_HOSTS="127.0.0.1")
    env.pop("REDIS_URL", None)
    script = Path(__file__).with_name("sqlite_delivery.py")
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["concurrent_write"] == ["locked", "committed"], outcome
    assert outcome["first_attempt"] == "database is locked" and outcome["swept"], outcome
    assert outcome["status"] == "delivered" and outcome["attempts"] == 1 and outcome["visits"] == 2, outcome


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_delivery_whose_worker_died_is_sent_again_by_the_sweep(campaign_factory, settings, receivers,
                                                                 killable_worker) -> None:
    from tests.conftest import kill_pool_process

    worker, queue, log = killable_worker("webhook-sweep", STEPLAB_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
                                         STEPLAB_WEBHOOK_TIMEOUT_S="60")
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STEPLAB_WEBHOOK_TIMEOUT_S = 60.0
    settings.STEPLAB_WEBHOOK_QUEUE = queue
    first_seen: list[Visit] = []

    def hold_first_then_answer(conn: socket.socket, visit: Visit) -> None:
        if not first_seen:
            first_seen.append(visit)
            time.sleep(120)  # the worker is killed while it waits here
            return
        send_all(conn, visit, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    receivers.append(RawReceiver(hold_first_then_answer))
    delivery = _delivery(_stored_hook(campaign_factory("sweep"), f"{receivers[0].url}/hook"))
    from webhooks.tasks import deliver_task

    deliver_task.apply_async((delivery.pk,), queue=queue)
    wait_for(lambda: first_seen, timeout=60, what=lambda: log.read_text()[-3000:])
    kill_pool_process(worker)
    # The task comes back (acks late) but finds the delivery claimed: nothing is sent until the sweep.
    claimed = Delivery.objects.get(pk=delivery.pk)
    assert claimed.claimed_at is not None and claimed.status == Delivery.Status.PENDING and claimed.attempts == 0
    assert sweep_deliveries() == []  # a claim younger than the deadline plus the grace is left alone
    later = timezone.now() + timedelta(seconds=60 + SWEEP_GRACE_S + 1)
    assert sweep_deliveries(now=later) == [delivery.pk]
    wait_for(lambda: Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.DELIVERED, timeout=60,
             what=lambda: log.read_text()[-3000:])
    sent_again = [v for v in receivers[0].visits if v is not first_seen[0]]
    assert sent_again and f"{DELIVERY_HEADER}: {delivery.pk}".encode() in sent_again[0].request
    assert Delivery.objects.get(pk=delivery.pk).attempts == 1  # the dead attempt recorded nothing


@pytest.mark.django_db
def test_stored_hooks_the_rules_refuse_are_turned_off_with_the_reason(campaign_factory, member, settings) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["10.0.0.7"]
    campaign = campaign_factory("stored")
    bad = _stored_hook(campaign, BACKSLASH.format(port=9101))
    inside = _stored_hook(campaign, "http://192.168.1.5/hook")
    kept = [_stored_hook(campaign, "http://10.0.0.7/hook"), _stored_hook(campaign, "https://hooks.example.com/x")]
    migration = importlib.import_module("webhooks.migrations.0003_disable_refused_receivers")
    migration.disable_refused(apps, None)
    bad.refresh_from_db()
    inside.refresh_from_db()
    assert not bad.is_active and bad.disabled_reason == "URL refused: The URL contains a backslash."
    assert not inside.is_active and "private, loopback or link-local" in inside.disabled_reason
    assert all(Webhook.objects.get(pk=hook.pk).is_active for hook in kept)
    page = _admin_client(campaign, member).get(f"/manage/c/{campaign.slug}/webhooks/")
    assert page.status_code == 200 and b"turned off: URL refused: The URL contains a backslash." in page.content


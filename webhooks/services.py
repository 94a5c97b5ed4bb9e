"""Webhooks: registering a receiver (its address checked), emitting events after the commit that caused them,
and delivering them signed, with retries.

Signature: ``X-Steplab-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the hook's secret>``.
A receiver recomputes it over the raw body and refuses a mismatch or an old ``t`` (replays).
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotate.models import AssignmentStatus, Campaign, Solution

from .models import Delivery, Event, ProgressMilestone, Webhook

MILESTONES = (25, 50, 75, 100)
SIGNATURE_HEADER = "X-Steplab-Signature"
EVENT_HEADER = "X-Steplab-Event"
DELIVERY_HEADER = "X-Steplab-Delivery"


class WebhookRefused(ValueError):
    """A registration the rules refuse; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _allowed_host(host: str) -> bool:
    return host.lower() in {h.lower() for h in settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS}


def check_receiver_url(url: str) -> None:
    """Refuse a receiver on a private, loopback, link-local or otherwise non-public address (the host is
    resolved: a public name pointing inside is refused too), unless ``STEPLAB_WEBHOOK_ALLOWED_HOSTS`` names it.
    Otherwise a campaign admin could make the server POST into its own network."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused("url", f"{url!r} is not an http(s) URL with a host.")
    host = parts.hostname
    if _allowed_host(host):
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, ValueError) as error:
        raise WebhookRefused("url", f"The host {host!r} does not resolve: {error}.") from None
    for address in sorted(addresses):
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if not ip.is_global or ip.is_multicast:
            raise WebhookRefused("url", f"The host {host!r} resolves to {address}, a private, loopback or link-local "
                                        f"address: receivers must be public (or named in "
                                        f"STEPLAB_WEBHOOK_ALLOWED_HOSTS).")


def register_webhook(*, campaign: Campaign, url: str, events: Iterable[str], user: Any = None) -> tuple[Webhook, str]:
    """A new webhook and its secret, which the caller shows once (only its signatures reveal it afterwards)."""
    events = list(dict.fromkeys(events))
    unknown = [e for e in events if e not in Event.values]
    if not events or unknown:
        raise WebhookRefused("events", f"Unknown event(s) {', '.join(unknown)}; choose from "
                                       f"{', '.join(Event.values)}." if unknown else "Choose at least one event.")
    check_receiver_url(url)
    secret = f"whsec_{secrets.token_urlsafe(32)}"
    hook = Webhook.objects.create(campaign=campaign, url=url, events=events, secret=secret,
                                  created_by=user if getattr(user, "pk", None) else None)
    return hook, secret


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def emit(*, campaign_id: int, event: str, data: dict[str, Any]) -> list[int]:
    """Record one delivery per active hook of the campaign subscribed to ``event`` and send each to the worker
    once this transaction commits. Returns the deliveries' ids."""
    hooks = [h for h in Webhook.objects.filter(campaign_id=campaign_id, is_active=True) if event in h.events]
    payload = {"event": event, "campaign": campaign_id, "sent_at": timezone.now().isoformat(), "data": data}
    deliveries = Delivery.objects.bulk_create([Delivery(webhook=h, event=event, payload=payload) for h in hooks])
    for delivery in deliveries:
        transaction.on_commit(_sender(delivery.pk))
    return [d.pk for d in deliveries]


def _sender(delivery_id: int) -> Callable[[], None]:
    def send() -> None:
        from .tasks import deliver_task

        deliver_task.apply_async((delivery_id,), queue=settings.STEPLAB_WEBHOOK_QUEUE)

    return send


def emit_on_commit(*, campaign_id: int, event: str, data: dict[str, Any]) -> None:
    """``emit`` once the caller's transaction commits: a rolled-back change announces nothing."""
    transaction.on_commit(lambda: emit(campaign_id=campaign_id, event=event, data=data))


def attempt_delivery(delivery_id: int, *, now: datetime | None = None) -> bool:
    """POST one delivery to its receiver, signed; log the attempt. True when it should be tried again later
    (no 2xx answer and attempts left). The address is checked again: DNS may have changed since registration."""
    with transaction.atomic():
        delivery = (Delivery.objects.select_for_update().select_related("webhook")
                    .filter(pk=delivery_id, status=Delivery.Status.PENDING).first())
        if delivery is None:
            return False  # delivered, given up, or removed: a redelivered task does nothing
        hook = delivery.webhook
        body = json.dumps({**delivery.payload, "delivery": delivery.pk}, separators=(",", ":")).encode()
        stamp = int(time.time())
        started = time.perf_counter()
        code: int | None = None
        error = ""
        try:
            check_receiver_url(hook.url)
            answer = requests.post(hook.url, data=body, timeout=settings.STEPLAB_WEBHOOK_TIMEOUT_S,
                                   allow_redirects=False, headers={
                                       "Content-Type": "application/json", "User-Agent": "Steplab-Webhooks/1",
                                       EVENT_HEADER: delivery.event, DELIVERY_HEADER: str(delivery.pk),
                                       SIGNATURE_HEADER: sign(hook.secret, stamp, body)})
            code = answer.status_code
            if not 200 <= code < 300:
                error = f"HTTP {code}: {answer.text[:200]}"
        except WebhookRefused as refused:
            error = str(refused)
        except requests.RequestException as failed:
            error = f"{type(failed).__name__}: {failed}"
        now = now or timezone.now()
        delivery.attempts += 1
        delivery.last_status_code, delivery.last_error = code, error
        delivery.attempts_log = [*delivery.attempts_log, {
            "at": now.isoformat(), "status_code": code, "error": error,
            "ms": round((time.perf_counter() - started) * 1000, 1)}]
        retry = False
        if not error:
            delivery.status, delivery.delivered_at = Delivery.Status.DELIVERED, now
        elif delivery.attempts >= settings.STEPLAB_WEBHOOK_MAX_ATTEMPTS:
            delivery.status = Delivery.Status.FAILED
        else:
            retry = True
        delivery.save(update_fields=["status", "attempts", "last_status_code", "last_error", "attempts_log",
                                     "delivered_at"])
    return retry


def retry_delay_s(attempts: int) -> float:
    """Exponential backoff: the base delay, doubled after each failed attempt."""
    return float(settings.STEPLAB_WEBHOOK_RETRY_BASE_S * 2 ** max(attempts - 1, 0))


def labeled_percent(campaign_id: int) -> int:
    """Share of the campaign's regular solutions (not gold, not screening) with a submitted labeling, in %,
    rounded down (100 only when every one is labeled)."""
    regular = Solution.objects.filter(campaign_id=campaign_id, is_quality_control=False, is_screening=False)
    total = regular.count()
    if not total:
        return 0
    from annotate.models import Assignment

    labeled = regular.filter(Exists(Assignment.objects.filter(
        solution_id=OuterRef("pk"), status=AssignmentStatus.SUBMITTED, is_gold=False))).count()
    return labeled * 100 // total


def check_progress_milestones(campaign_id: int) -> list[int]:
    """Announce each milestone the campaign has newly reached, once (the unique pair settles races)."""
    percent = labeled_percent(campaign_id)
    reached = []
    for milestone in MILESTONES:
        if percent < milestone:
            break
        try:
            with transaction.atomic():
                ProgressMilestone.objects.create(campaign_id=campaign_id, percent=milestone)
        except IntegrityError:
            continue
        reached.append(milestone)
        emit(campaign_id=campaign_id, event=Event.CAMPAIGN_PROGRESS,
             data={"percent_labeled": milestone, "percent_now": percent})
    return reached


def after_labeling_finished(campaign_id: int) -> None:
    """A labeling was submitted: check the milestones in the worker, when some hook listens for them."""
    def check() -> None:
        # A campaign has a handful of hooks; JSON containment (``events__contains``) does not exist on SQLite.
        listening = any(Event.CAMPAIGN_PROGRESS.value in events for events in Webhook.objects.filter(
            campaign_id=campaign_id, is_active=True).values_list("events", flat=True))
        if listening:
            from .tasks import progress_milestones_task

            progress_milestones_task.apply_async((campaign_id,), queue=settings.STEPLAB_WEBHOOK_QUEUE)

    transaction.on_commit(check)

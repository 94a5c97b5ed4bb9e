"""Webhooks: registering a receiver (its address checked), emitting events after the commit that caused them,
and delivering them signed, with retries.

Every request goes through ``stepcore.outbound`` (the address checked and connected to once, a total deadline, a
capped answer, no redirects). A delivery claims its row with one conditional UPDATE and sends with no database
transaction open; what the receiver answered is recorded afterwards. A delivery whose worker died is sent again
by ``sweep_deliveries`` (a periodic task): a receiver may get a delivery twice and tells by ``X-Steplab-Delivery``.

Signature: ``X-Steplab-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the hook's secret>``.
A receiver recomputes it over the raw body and refuses a mismatch or an old ``t`` (replays).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotate import permissions
from annotate.models import AssignmentStatus, Campaign, Solution
from stepcore import outbound
from steplab import events
from steplab.celery import send_task

from .models import Delivery, Event, ProgressMilestone, Webhook

MILESTONES = (25, 50, 75, 100)
SIGNATURE_HEADER = "X-Steplab-Signature"
EVENT_HEADER = "X-Steplab-Event"
DELIVERY_HEADER = "X-Steplab-Delivery"
#: What a receiver's answer may cost us: its status matters, its body only as a quote in the log.
MAX_ANSWER_BYTES = 64 * 1024
#: A claim older than the deadline plus this means its worker died; a due attempt this late lost its task.
SWEEP_GRACE_S = 60.0


class WebhookRefused(ValueError):
    """A registration the rules refuse; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def receiver_rules() -> outbound.Rules:
    """The outbound rules of webhook receivers, from the settings."""
    return outbound.Rules(allowed=outbound.allowed_from(settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS),
                          deadline_s=settings.STEPLAB_WEBHOOK_TIMEOUT_S, max_answer_bytes=MAX_ANSWER_BYTES,
                          setting="STEPLAB_WEBHOOK_ALLOWED_HOSTS")


def check_receiver_url(url: str) -> outbound.Target:
    """The receiver's checked target, or ``WebhookRefused`` saying why (stepcore.outbound's rules: a public address
    or one ``STEPLAB_WEBHOOK_ALLOWED_HOSTS`` admits). Otherwise a campaign admin could make the server POST into
    its own network."""
    try:
        return outbound.check_url(url, rules=receiver_rules())
    except outbound.OutboundRefused as refused:
        raise WebhookRefused("url", str(refused)) from None


def register_webhook(*, campaign: Campaign, url: str, events: Iterable[str],
                     user: permissions.Actor) -> tuple[Webhook, str]:
    """A new webhook and its secret, which the caller shows once (only its signatures reveal it afterwards);
    ``NotAllowed`` unless ``user`` manages the campaign, as on its page."""
    permissions.require(permissions.can_manage, user, campaign,
                        f"only staff and admins of campaign {campaign.slug} register webhooks")
    events = list(dict.fromkeys(events))
    unknown = [e for e in events if e not in Event.values]
    if not events or unknown:
        raise WebhookRefused("events", f"Unknown event(s) {', '.join(unknown)}; choose from "
                                       f"{', '.join(Event.values)}." if unknown else "Choose at least one event.")
    check_receiver_url(url)
    secret = f"whsec_{secrets.token_urlsafe(32)}"
    hook = Webhook.objects.create(campaign=campaign, url=url, events=events, secret=secret,
                                  created_by=permissions.account_of(user))
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


def attempt_delivery(delivery_id: int, *, now: datetime | None = None) -> bool:
    """POST one delivery to its receiver, signed; log the attempt. True when it should be tried again later
    (no 2xx answer and attempts left). The address is checked again: DNS may have changed since registration.
    Runs outside any transaction: the row is claimed and committed first, the receiver is waited on with
    nothing locked, and the answer recorded after."""
    if transaction.get_connection().in_atomic_block:
        raise RuntimeError("attempt_delivery waits on a receiver: call it outside any transaction")
    claimed_at = timezone.now()
    if not Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING,
                                   claimed_at__isnull=True).update(claimed_at=claimed_at):
        return False  # delivered, given up, removed, or another attempt holds it: a redelivered task does nothing
    delivery = Delivery.objects.select_related("webhook").get(pk=delivery_id)
    hook = delivery.webhook
    started = time.perf_counter()
    code, error = _send(delivery, hook)
    return _record(delivery_id, claimed_at=claimed_at, code=code, error=error, now=now or timezone.now(),
                   ms=round((time.perf_counter() - started) * 1000, 1))


def _send(delivery: Delivery, hook: Webhook) -> tuple[int | None, str]:
    """The receiver's status code and the error to log ("" for a 2xx)."""
    if not hook.is_active:
        return None, f"The webhook is disabled{': ' + hook.disabled_reason if hook.disabled_reason else ''}."
    body = json.dumps({**delivery.payload, "delivery": delivery.pk}, separators=(",", ":")).encode()
    try:
        target = check_receiver_url(hook.url)
        answer = outbound.post(target, body=body, rules=receiver_rules(), headers={
            "Content-Type": "application/json", "User-Agent": "Steplab-Webhooks/1",
            EVENT_HEADER: delivery.event, DELIVERY_HEADER: str(delivery.pk),
            SIGNATURE_HEADER: sign(hook.secret, int(time.time()), body)})
    except WebhookRefused as refused:
        return None, str(refused)
    except outbound.OutboundFailed as failed:
        return None, str(failed)
    return answer.status, "" if 200 <= answer.status < 300 else answer.summary()


def _record(delivery_id: int, *, claimed_at: datetime, code: int | None, error: str, now: datetime,
            ms: float) -> bool:
    """Write one attempt's outcome onto the row this attempt claimed; True when another attempt is due."""
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update().filter(pk=delivery_id, claimed_at=claimed_at).first()
        if delivery is None:
            return False  # the sweep took the claim back and sent the delivery again: that attempt records
        delivery.attempts += 1
        delivery.last_status_code, delivery.last_error = code, error
        delivery.attempts_log = [*delivery.attempts_log, {"at": now.isoformat(), "status_code": code,
                                                          "error": error, "ms": ms}]
        delivery.claimed_at = None
        retry = False
        if not error:
            delivery.status, delivery.delivered_at = Delivery.Status.DELIVERED, now
        elif delivery.attempts >= settings.STEPLAB_WEBHOOK_MAX_ATTEMPTS or not delivery.webhook.is_active:
            delivery.status = Delivery.Status.FAILED
        else:
            retry = True
            delivery.next_attempt_at = now + timedelta(seconds=retry_delay_s(delivery.attempts))
        delivery.save(update_fields=["status", "attempts", "last_status_code", "last_error", "attempts_log",
                                     "delivered_at", "claimed_at", "next_attempt_at"])
    return retry


def sweep_deliveries(*, now: datetime | None = None) -> list[int]:
    """Send again the pending deliveries whose attempt died with its worker (claimed longer ago than the deadline
    plus a grace) or whose due attempt never ran (its task lost); the ids sent. At least once, not exactly once."""
    now = now or timezone.now()
    grace = timedelta(seconds=SWEEP_GRACE_S)
    pending = Delivery.objects.filter(status=Delivery.Status.PENDING)
    pending.filter(claimed_at__lt=now - grace - timedelta(seconds=settings.STEPLAB_WEBHOOK_TIMEOUT_S)).update(
        claimed_at=None)
    due = list(pending.filter(claimed_at__isnull=True, next_attempt_at__lt=now - grace).values_list("pk", flat=True))
    # Each is due again a grace from now: a queue slower than that gets one extra task, not one a minute.
    Delivery.objects.filter(pk__in=due, claimed_at__isnull=True).update(next_attempt_at=now)
    from .tasks import deliver_task

    for delivery_id in due:
        send_task(deliver_task, args=[delivery_id], queue=settings.STEPLAB_WEBHOOK_QUEUE)
    return due


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


def on_domain_event(event: events.Event) -> None:
    """Subscribed in ``WebhooksConfig.ready``: a campaign event receivers subscribe to becomes their deliveries (the
    event's transaction has committed); a submitted labeling may reach a milestone, checked in the worker when some
    hook listens for them."""
    if event.name in Event.values:
        emit(campaign_id=event.campaign_id, event=event.name.value, data=event.data)
    elif event.name == events.Name.LABELING_SUBMITTED and _listens_for_progress(event.campaign_id):
        from .tasks import progress_milestones_task

        progress_milestones_task.apply_async((event.campaign_id,), queue=settings.STEPLAB_WEBHOOK_QUEUE)


def _listens_for_progress(campaign_id: int) -> bool:
    # A campaign has a handful of hooks; JSON containment (``events__contains``) does not exist on SQLite.
    return any(Event.CAMPAIGN_PROGRESS.value in names for names in Webhook.objects.filter(
        campaign_id=campaign_id, is_active=True).values_list("events", flat=True))

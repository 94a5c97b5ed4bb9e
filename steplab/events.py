"""Domain events: what happened in one app that another acts on, without the first knowing who listens.

The app where it happens calls ``emit_on_commit`` inside the transaction that caused it; once that transaction
commits, every subscriber is called with the event (a rolled-back change announces nothing). Subscribers register
in their ``AppConfig.ready`` (``webhooks`` turns campaign events into deliveries). This module knows the events'
names and nothing of the apps, so no app imports another to tell it something happened.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.db import transaction


class Name(StrEnum):
    """What can happen; the values are the webhook event names receivers subscribe to."""

    DATASET_VERSION_READY = "dataset.version_ready"
    JOB_FINISHED = "job.finished"
    JOB_FAILED = "job.failed"
    LABELING_ROUND_COMPLETED = "labeling_round.completed"
    #: a labeler submitted a solution's labeling (the campaign's labeled share may have grown)
    LABELING_SUBMITTED = "labeling.submitted"


@dataclass(frozen=True)
class Event:
    name: Name
    campaign_id: int
    data: dict[str, Any] = field(default_factory=dict)


Subscriber = Callable[[Event], None]
_subscribers: list[Subscriber] = []


def subscribe(subscriber: Subscriber) -> None:
    """Call ``subscriber`` with every event published from now on (once, however often it subscribes)."""
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)


def publish(event: Event) -> None:
    """Hand ``event`` to every subscriber now."""
    for subscriber in tuple(_subscribers):
        subscriber(event)


def emit_on_commit(name: Name, *, campaign_id: int, data: dict[str, Any] | None = None) -> None:
    """``publish`` once the caller's transaction commits (at once outside one)."""
    event = Event(name=name, campaign_id=campaign_id, data=data or {})
    transaction.on_commit(lambda: publish(event))

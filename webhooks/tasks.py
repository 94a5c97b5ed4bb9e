"""Celery tasks of the webhooks; each one is a thin call into a service."""
from __future__ import annotations

from typing import Any

from celery import shared_task

from .services import attempt_delivery, check_progress_milestones, retry_delay_s, sweep_deliveries


@shared_task(name="webhooks.deliver", bind=True, ignore_result=True, max_retries=None)
def deliver_task(self: Any, delivery_id: int) -> None:
    """One attempt; a failed one comes back after the backoff (the service counts attempts and gives up)."""
    if attempt_delivery(delivery_id):
        raise self.retry(countdown=retry_delay_s(self.request.retries + 1))


@shared_task(name="webhooks.progress_milestones", ignore_result=True)
def progress_milestones_task(campaign_id: int) -> list[int]:
    return check_progress_milestones(campaign_id)


@shared_task(name="webhooks.sweep_deliveries", ignore_result=True)
def sweep_deliveries_task() -> list[int]:
    """Periodic (beat): send again the deliveries a dead worker left claimed or a lost task left due."""
    return sweep_deliveries()

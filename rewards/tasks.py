"""Celery tasks of the dataset side; each is a thin call into ``rewards.services.datasets``.

The export task is idempotent (content-addressed folder, version row created last), so Celery may
run it again after a crash: ``acks_late`` + ``reject_on_worker_lost`` (settings) redeliver a task
whose worker process died, and ``autoretry_for`` retries one that raised.
"""
from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from annotate.models import Campaign
from rewards.exports import ExportOptions

from .services.datasets import campaigns_due, create_dataset_version


@shared_task(name="rewards.snapshot_dataset", bind=True, acks_late=True, autoretry_for=(Exception,),
             retry_backoff=10, retry_backoff_max=600, max_retries=5)
def snapshot_dataset_task(self: Task, campaign_id: int, options: dict[str, Any] | None = None) -> int | None:
    """Export one campaign; returns the new version's id, or None when the labels were unchanged."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    version = create_dataset_version(campaign, options=ExportOptions(**(options or {})))
    return version.pk if version else None


@shared_task(name="rewards.snapshot_due_datasets")
def snapshot_due_datasets() -> list[int]:
    """Beat entry: queue an export for each active campaign that is due and whose labels changed."""
    due = campaigns_due()
    for campaign in due:
        snapshot_dataset_task.delay(campaign.pk)
    return [campaign.pk for campaign in due]

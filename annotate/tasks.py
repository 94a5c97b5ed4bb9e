"""Celery tasks of the labeling side; each one is a thin call into a service."""
from __future__ import annotations

from celery import shared_task

from .services.labeling import reap_expired_leases


@shared_task(name="annotate.reap_expired_leases")
def reap_expired_leases_task() -> int:
    return reap_expired_leases()


@shared_task(name="annotate.ping_database")
def ping_database(campaign_slug: str) -> dict[str, int]:
    """Report a campaign's solution count from the worker's own connection (used by health checks)."""
    from .models import Solution

    return {"solutions": Solution.objects.filter(campaign__slug=campaign_slug).count()}

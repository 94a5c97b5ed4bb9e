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


@shared_task(name="annotate.run_import_job", ignore_result=True)
def run_import_job_task(job_id: int) -> str | None:
    """A browser upload; the service claims the job once, so a redelivery does nothing."""
    from .services.campaigns import run_import_job

    job = run_import_job(job_id)
    return job.status if job else None


@shared_task(name="annotate.dispatch_pending_imports")
def dispatch_pending_imports_task() -> list[int]:
    """Beat: send the imports uploaded while the broker was down."""
    from .services.campaigns import dispatch_pending_imports

    return dispatch_pending_imports()


@shared_task(name="annotate.sweep_import_files")
def sweep_import_files_task() -> int:
    """Beat: delete uploads that outlived their import job."""
    from .services.campaigns import sweep_import_files

    return sweep_import_files()


@shared_task(name="annotate.compute_campaign_metrics", ignore_result=True)
def compute_campaign_metrics_task(campaign_id: int) -> int:
    """Precompute a campaign's quality metrics (too slow for a page view) and flag low-quality labelers."""
    from .models import Campaign
    from .services.agreement import compute_campaign_metrics

    return compute_campaign_metrics(Campaign.objects.get(pk=campaign_id)).duration_ms


@shared_task(name="annotate.compute_all_campaign_metrics")
def compute_all_campaign_metrics_task() -> int:
    """Beat: refresh the metrics of every active campaign, one task each."""
    from .models import Campaign

    ids = list(Campaign.objects.filter(is_active=True).values_list("pk", flat=True))
    for campaign_id in ids:
        compute_campaign_metrics_task.delay(campaign_id)
    return len(ids)

"""Celery tasks of the labeling side; each one is a thin call into a service."""
from __future__ import annotations

from celery import shared_task

from .models import Campaign, ImportJob
from .services.agreement import compute_campaign_metrics
from .services.campaigns import dispatch_pending_imports, run_import_job, sweep_import_files
from .services.leases import reap_expired_leases


@shared_task(name="annotate.reap_expired_leases")
def reap_expired_leases_task() -> int:
    return reap_expired_leases()


@shared_task(name=ImportJob.task_name, ignore_result=True)
def run_import_job_task(job_id: int) -> str | None:
    """A browser upload; the service claims the job once, so a redelivery does nothing."""
    job = run_import_job(job_id)
    return job.status if job else None


@shared_task(name="annotate.dispatch_pending_imports")
def dispatch_pending_imports_task() -> list[int]:
    """Beat: send the imports uploaded while the broker was down."""
    return dispatch_pending_imports()


@shared_task(name="annotate.sweep_import_files")
def sweep_import_files_task() -> int:
    """Beat: delete uploads that outlived their import job."""
    return sweep_import_files()


@shared_task(name="annotate.compute_campaign_metrics", ignore_result=True)
def compute_campaign_metrics_task(campaign_id: int) -> int:
    """Precompute a campaign's quality metrics (too slow for a page view) and flag low-quality labelers."""
    return compute_campaign_metrics(Campaign.objects.get(pk=campaign_id)).duration_ms


@shared_task(name="annotate.compute_all_campaign_metrics")
def compute_all_campaign_metrics_task() -> int:
    """Beat: refresh the metrics of every active campaign, one task each."""
    ids = list(Campaign.objects.filter(is_active=True).values_list("pk", flat=True))
    for campaign_id in ids:
        compute_campaign_metrics_task.delay(campaign_id)
    return len(ids)

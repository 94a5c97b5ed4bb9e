"""Celery tasks of reward-model jobs; each is a thin call into ``rewards.jobs.services``.

A local job's watcher runs on the ``gpu`` queue (it starts the subprocess there); a Slurm or Kubernetes
job's watcher only polls a scheduler, so it runs on ``default``.
"""
from __future__ import annotations

from typing import Any

from celery import shared_task

from .models import Backend, SamplingJob, ScoringJob, TrainingJob

RUN_TRAINING = "jobs.run_training_job"
RUN_SCORING = "jobs.run_scoring_job"
RUN_SAMPLING = "jobs.run_sampling_job"
REAP = "jobs.reap_stale_jobs"
AUTO_TRAIN = "jobs.auto_train"
AUTO_GENERATIONS = "jobs.auto_start_generations"
ADVANCE_COMPARISON = "jobs.advance_comparison"


@shared_task(name=RUN_TRAINING, acks_late=True, ignore_result=True)
def run_training_job(job_id: int) -> str | None:
    from .services.comparisons import job_finished
    from .services.training import run_training_job as run

    status = run(job_id)
    job = TrainingJob.objects.filter(pk=job_id).first()
    if job is not None:
        job_finished(job)  # a comparison's training: move it on (no-op otherwise)
    return status


@shared_task(name=RUN_SCORING, acks_late=True, ignore_result=True)
def run_scoring_job(job_id: int) -> str | None:
    from .services.comparisons import job_finished
    from .services.generations import scoring_finished
    from .services.scoring import run_scoring_job as run

    status = run(job_id)
    scoring_finished(job_id)  # a generation's scoring: select its batch now (no-op for other scorings)
    job = ScoringJob.objects.filter(pk=job_id).first()
    if job is not None:
        job_finished(job)  # a comparison's scoring: evaluate once both are done
    return status


@shared_task(name=ADVANCE_COMPARISON, acks_late=True, ignore_result=True)
def advance_comparison(run_id: int) -> str | None:
    from .services.comparisons import advance

    return advance(run_id)


@shared_task(name=RUN_SAMPLING, acks_late=True, ignore_result=True)
def run_sampling_job(job_id: int) -> str | None:
    from .services.sampling import run_sampling_job as run

    return run(job_id)


@shared_task(name=REAP)
def reap_stale_jobs() -> dict[str, list[int]]:
    from .services.comparisons import reconcile as reconcile_comparisons
    from .services.generations import reconcile
    from .services.sampling import reap_sampling_jobs
    from .services.scoring import reap_scoring_jobs
    from .services.training import reap_training_jobs

    return {"training": reap_training_jobs(), "scoring": reap_scoring_jobs(), "sampling": reap_sampling_jobs(),
            "generations": reconcile(), "comparisons": reconcile_comparisons(),
            "sent_again": [pk for ids in enqueue_undispatched().values() for pk in ids]}


@shared_task(name=AUTO_TRAIN)
def auto_train() -> list[int]:
    from .services.training import auto_train as start

    return [job.pk for job in start()]


@shared_task(name=AUTO_GENERATIONS)
def auto_start_generations() -> list[int]:
    from .services.generations import auto_start_generations as start

    return [generation.pk for generation in start()]


def enqueue(job: Any) -> bool:
    """Send the watcher task for a queued job (call after commit) and remember its id; False when the broker is
    down: the id stays empty and ``reap_stale_jobs`` sends it once the broker is back."""
    from steplab.celery import send_task

    task = {TrainingJob: run_training_job, ScoringJob: run_scoring_job, SamplingJob: run_sampling_job}[type(job)]
    queue = "gpu" if job.backend == Backend.LOCAL else "default"
    result = send_task(task, args=[job.pk], queue=queue)
    if result is None:
        return False
    type(job).objects.filter(pk=job.pk).update(celery_task_id=result.id)
    return True


def enqueue_undispatched(older_than_s: float = 30.0) -> dict[str, list[int]]:
    """Queued jobs whose task never reached the broker (it was down when they were started): send them now."""
    from datetime import timedelta

    from django.utils import timezone

    from .models import JobStatus

    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    sent: dict[str, list[int]] = {}
    for model in (TrainingJob, ScoringJob, SamplingJob):
        for job in model.objects.filter(status=JobStatus.QUEUED, celery_task_id="", created_at__lt=cutoff):
            if enqueue(job):
                sent.setdefault(model.__name__, []).append(job.pk)
    return sent


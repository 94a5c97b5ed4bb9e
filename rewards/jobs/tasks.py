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


@shared_task(name=RUN_TRAINING, acks_late=True)
def run_training_job(job_id: int) -> str | None:
    from .services.training import run_training_job as run

    return run(job_id)


@shared_task(name=RUN_SCORING, acks_late=True)
def run_scoring_job(job_id: int) -> str | None:
    from .services.generations import scoring_finished
    from .services.scoring import run_scoring_job as run

    status = run(job_id)
    scoring_finished(job_id)  # a generation's scoring: select its batch now (no-op for other scorings)
    return status


@shared_task(name=RUN_SAMPLING, acks_late=True)
def run_sampling_job(job_id: int) -> str | None:
    from .services.sampling import run_sampling_job as run

    return run(job_id)


@shared_task(name=REAP)
def reap_stale_jobs() -> dict[str, list[int]]:
    from .services.generations import reconcile
    from .services.sampling import reap_sampling_jobs
    from .services.scoring import reap_scoring_jobs
    from .services.training import reap_training_jobs

    return {"training": reap_training_jobs(), "scoring": reap_scoring_jobs(), "sampling": reap_sampling_jobs(),
            "generations": reconcile()}


@shared_task(name=AUTO_TRAIN)
def auto_train() -> list[int]:
    from .services.training import auto_train as start

    return [job.pk for job in start()]


@shared_task(name=AUTO_GENERATIONS)
def auto_start_generations() -> list[int]:
    from .services.generations import auto_start_generations as start

    return [generation.pk for generation in start()]


def enqueue(job: Any) -> None:
    """Send the watcher task for a queued job (call after commit) and remember its id."""
    task = {TrainingJob: run_training_job, ScoringJob: run_scoring_job, SamplingJob: run_sampling_job}[type(job)]
    queue = "gpu" if job.backend == Backend.LOCAL else "default"
    result = task.apply_async(args=[job.pk], queue=queue)
    type(job).objects.filter(pk=job.pk).update(celery_task_id=result.id)


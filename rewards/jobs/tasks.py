"""Celery tasks of reward-model jobs; each is a thin call into ``rewards.jobs.services``.

A job's task is sent by ``steplab.jobs.dispatch`` under the name its model declares (``task_name``), to the
queue it chooses: a local job's watcher runs on the ``gpu`` queue (it starts the subprocess there); a Slurm
or Kubernetes job's watcher only polls a scheduler, so it runs on ``default``.
"""
from __future__ import annotations

from celery import shared_task

from .models import ComparisonRun, MachineLabelingJob, SamplingJob, ScoringJob, TrainingJob
from .services import comparisons, labeling_rounds, machine_labeling, runner, sampling, scoring, training

REAP = "jobs.reap_stale_jobs"
AUTO_TRAIN = "jobs.auto_train"
AUTO_GENERATIONS = "jobs.auto_start_generations"


@shared_task(name=TrainingJob.task_name, acks_late=True, ignore_result=True)
def run_training_job(job_id: int) -> str | None:
    status = training.run_training_job(job_id)
    job = TrainingJob.objects.filter(pk=job_id).first()
    if job is not None:
        comparisons.job_finished(job)  # a comparison's training: move it on (no-op otherwise)
    return status


@shared_task(name=ScoringJob.task_name, acks_late=True, ignore_result=True)
def run_scoring_job(job_id: int) -> str | None:
    status = scoring.run_scoring_job(job_id)
    labeling_rounds.scoring_finished(job_id)  # a labeling round's scoring: select its batch now (no-op otherwise)
    job = ScoringJob.objects.filter(pk=job_id).first()
    if job is not None:
        comparisons.job_finished(job)  # a comparison's scoring: evaluate once both are done
    return status


@shared_task(name=ComparisonRun.task_name, acks_late=True, ignore_result=True)
def advance_comparison(run_id: int) -> str | None:
    return comparisons.advance(run_id)


@shared_task(name=SamplingJob.task_name, acks_late=True, ignore_result=True)
def run_sampling_job(job_id: int) -> str | None:
    return sampling.run_sampling_job(job_id)


@shared_task(name=MachineLabelingJob.task_name, acks_late=True, ignore_result=True)
def run_machine_labeling_job(job_id: int) -> str | None:
    return machine_labeling.run_machine_labeling_job(job_id)


@shared_task(name=REAP)
def reap_stale_jobs() -> dict[str, list[int]]:
    done = {"training": training.reap_training_jobs(), "scoring": scoring.reap_scoring_jobs(),
            "sampling": sampling.reap_sampling_jobs(),
            "machine_labeling": machine_labeling.reap_machine_labeling_jobs(),
            "generations": labeling_rounds.reconcile(),
            "comparisons": comparisons.reconcile()}
    return {**done, "sent_again": [pk for ids in runner.dispatch_undispatched().values() for pk in ids]}


@shared_task(name=AUTO_TRAIN)
def auto_train() -> list[int]:
    return [job.pk for job in training.auto_train()]


@shared_task(name=AUTO_GENERATIONS)
def auto_start_labeling_rounds() -> list[int]:
    return [labeling_round.pk for labeling_round in labeling_rounds.auto_start_labeling_rounds()]

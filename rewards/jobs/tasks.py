"""Celery tasks of reward-model jobs; each is a thin call into ``rewards.jobs.services``.

Each kind of job's own task (``jobs.run_training_job`` …) is made by the job-kind registry from its declaration
(``rewards.jobs.kinds``), imported here so a worker registers them. A job's task is sent by
``steplab.jobs.dispatch`` under the name its model declares (``task_name``), to the queue it chooses: a local
job's watcher runs on the ``gpu`` queue (it starts the subprocess there); a Slurm or Kubernetes job's watcher
only polls a scheduler, so it runs on ``default``.
"""
from __future__ import annotations

from celery import shared_task

from annotate.services.import_reaping import reap_dead_imports

from .kinds.registry import kinds, load
from .services import labeling_rounds, runner, training

REAP = "jobs.reap_stale_jobs"
AUTO_TRAIN = "jobs.auto_train"
AUTO_GENERATIONS = "jobs.auto_start_generations"

load()  # every kind registers its task: a worker must know them all


@shared_task(name=REAP)
def reap_stale_jobs() -> dict[str, list[int]]:
    """Every kind's reaping, launched kinds first: a scoring job reaped now lets its labeling round's or
    comparison's reconciler move on in the same pass; then the labeling side's import jobs whose task died."""
    done = {kind.name: kind.reap() for kind in sorted(kinds(), key=lambda kind: not kind.launched)}
    return {**done, "imports": reap_dead_imports(),
            "sent_again": [pk for ids in runner.dispatch_undispatched().values() for pk in ids]}


@shared_task(name=AUTO_TRAIN)
def auto_train() -> list[int]:
    return [job.pk for job in training.auto_train()]


@shared_task(name=AUTO_GENERATIONS)
def auto_start_labeling_rounds() -> list[int]:
    return [labeling_round.pk for labeling_round in labeling_rounds.auto_start_labeling_rounds()]

"""Training a PRM or ORM: its pages are its own (``jobs:job``…); a comparison waiting on it moves on after."""
from functools import partial

from ..api.training import TrainingJobCancelView, TrainingJobsView, TrainingJobView
from ..models import TrainingJob
from ..services import comparisons, training
from .registry import JobKind, register

register(JobKind(
    name="training", model=TrainingJob, start=training.start_training_job, run=training.run_training_job,
    hooks=training.training_hooks, after=(partial(comparisons.job_finished, TrainingJob),),
    related=("dataset_version", "campaign", "started_by"),
    routes=(("jobs/", TrainingJobsView, "jobs"), ("jobs/<id:pk>/", TrainingJobView, "job"),
            ("jobs/<id:pk>/cancel/", TrainingJobCancelView, "job_cancel"))))

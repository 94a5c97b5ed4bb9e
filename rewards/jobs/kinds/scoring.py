"""Scoring a pool with a registered model; a labeling round or a comparison waiting on it moves on after."""
from functools import partial

from ..api.loop import ScoringJobCancelView, ScoringJobsView, ScoringJobView
from ..models import ScoringJob
from ..services import comparisons, labeling_rounds, scoring
from .registry import JobKind, register

register(JobKind(
    name="scoring", model=ScoringJob, start=scoring.start_scoring_job, run=scoring.run_scoring_job,
    hooks=scoring.scoring_hooks,
    after=(labeling_rounds.scoring_finished, partial(comparisons.job_finished, ScoringJob)),
    page="scoring", title="Scoring", related=("reward_model__campaign", "pool__campaign"),
    campaign_of=lambda job: job.reward_model.campaign,
    routes=(("campaigns/{campaign}/scoring/", ScoringJobsView, "scoring"),
            ("scoring/<id:pk>/", ScoringJobView, "scoring_job"),
            ("scoring/<id:pk>/cancel/", ScoringJobCancelView, "scoring_job_cancel"))))

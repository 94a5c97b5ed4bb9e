"""Labeling rounds (active learning): no task of their own (their work is a scoring job, whose follow-up
completes them); the reconciler completes a round whose scoring's watcher was lost."""
from ..api.rounds import GenerationsView, LabelingRoundsView
from ..models import LabelingRound
from ..services import labeling_rounds
from .registry import JobKind, register

register(JobKind(
    name="labeling_rounds", model=LabelingRound, start=labeling_rounds.start_labeling_round,
    reconcile=labeling_rounds.reconcile,
    routes=(("campaigns/{campaign}/labeling-rounds/", LabelingRoundsView, "labeling_rounds"),
            ("campaigns/{campaign}/generations/", GenerationsView, "generations"))))  # deprecated alias

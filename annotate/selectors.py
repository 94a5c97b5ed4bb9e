"""Reads of labeling data (the API's querysets), kept apart from the services' writes."""
from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from .models import Assignment, Completion, Rating, Solution, Step, StepDecision


def solutions_with_steps() -> QuerySet[Solution]:
    """Solutions with their steps and each step's completions, in index order (two prefetches)."""
    completions = Prefetch("steps__completions", queryset=Completion.objects.order_by("index"))
    return Solution.objects.prefetch_related(Prefetch("steps", queryset=Step.objects.order_by("index")), completions)


def assignments_with_ratings() -> QuerySet[Assignment]:
    """Assignments with their ratings and decisions in step order, and the solution's steps and completions."""
    return Assignment.objects.select_related("solution").prefetch_related(
        Prefetch("ratings", queryset=Rating.objects.select_related("completion__step").order_by(
            "completion__step__index", "completion__index")),
        Prefetch("decisions", queryset=StepDecision.objects.select_related("step").order_by("step__index")),
        Prefetch("solution__steps", queryset=Step.objects.order_by("index")),
        Prefetch("solution__steps__completions", queryset=Completion.objects.order_by("index")),
    )

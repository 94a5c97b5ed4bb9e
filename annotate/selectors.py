"""Reads of labeling data (the API's querysets), kept apart from the services' writes."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, Q, QuerySet

from .models import RESPLIT_INTO, Assignment, Campaign, Completion, Rating, Solution, SplitReport, Step, StepDecision


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


@dataclass
class SplitReports:
    """One solution's bad-split reports, as the admins' list shows them."""

    solution: Solution
    reports: list[SplitReport] = field(default_factory=list)

    @property
    def resplit_into(self) -> int | None:
        return self.solution.provenance.get(RESPLIT_INTO)


def solutions_with_split_reports(campaign_id: int) -> list[SplitReports]:
    """The campaign's solutions labelers reported as badly split, most reported first, in one query."""
    groups: dict[int, SplitReports] = {}
    reports = (SplitReport.objects.filter(step__solution__campaign_id=campaign_id)
               .select_related("step__solution__problem", "assignment__labeler"))  # in the model's order
    for report in reports:
        solution = report.step.solution
        groups.setdefault(solution.pk, SplitReports(solution)).reports.append(report)
    return sorted(groups.values(), key=lambda group: (-len(group.reports), group.solution.pk))


def graded_solutions(campaign: Campaign) -> dict[str, int]:
    """How many of a campaign's solutions are stored as correct, wrong, and without a verdict."""
    return campaign.solutions.aggregate(correct=Count("pk", filter=Q(is_correct=True)),
                                        wrong=Count("pk", filter=Q(is_correct=False)),
                                        ungraded=Count("pk", filter=Q(is_correct__isnull=True)))

"""Reads of labeling data (the API's querysets), kept apart from the services' writes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from .models import (
    RESPLIT_INTO,
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    Rating,
    Solution,
    SplitReport,
    Step,
    StepDecision,
)
from .scales import campaign_scale


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


def domain_results(campaign: Campaign) -> dict[str, Any]:
    """Per domain (the problems' ``subject``: MATH's subject, MMLU-Pro's category): solutions, how many the grader
    found correct and wrong, labeled solutions and error steps; and how often each error category was named.
    Two aggregate queries (the metrics snapshot stores them: the dashboard reads them without a query)."""
    errors = sorted(campaign_scale(campaign).error_values)
    submitted = Q(assignments__status=AssignmentStatus.SUBMITTED, assignments__is_gold=False)
    rows = (Solution.objects.filter(campaign=campaign).values("problem__subject")
            .annotate(solutions=Count("pk", distinct=True),
                      correct=Count("pk", filter=Q(is_correct=True), distinct=True),
                      wrong=Count("pk", filter=Q(is_correct=False), distinct=True),
                      labeled=Count("pk", filter=submitted, distinct=True),
                      error_steps=Count("assignments__ratings", filter=submitted & Q(
                          assignments__ratings__rating__in=errors, assignments__ratings__completion__index=0)))
            .order_by("problem__subject"))
    domains = [{"domain": row["problem__subject"] or "(none)", "solutions": row["solutions"], "correct": row["correct"],
                "wrong": row["wrong"], "labeled": row["labeled"], "error_steps": row["error_steps"]} for row in rows]
    categories = dict(Rating.objects.filter(assignment__solution__campaign=campaign,
                                            assignment__status=AssignmentStatus.SUBMITTED)
                      .exclude(error_category="").values_list("error_category").annotate(n=Count("pk"))
                      .values_list("error_category", "n"))
    return {"domains": domains,
            "error_categories": [{"name": name, "count": categories.get(name, 0)}
                                 for name in campaign.error_categories]}

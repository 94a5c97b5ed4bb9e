"""Reads of labeling data (the API's querysets, the management pages' reads), kept apart from the services' writes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet

from . import permissions
from .models import (
    RESPLIT_INTO,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMetrics,
    Completion,
    ImportJob,
    Membership,
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


def managed_campaign_rows(user: Any) -> QuerySet[Campaign]:
    """The campaigns ``user`` manages, each with its solution and active member counts, active ones first."""
    return permissions.managed_campaigns(user).annotate(
        n_solutions=Count("solutions", distinct=True),
        n_members=Count("memberships", filter=Q(memberships__is_active=True), distinct=True)).order_by(
        "-is_active", "name")


@dataclass(frozen=True)
class CampaignOverview:
    """The admin dashboard's reads: the precomputed metrics, flagged labelers, the latest imports, the gold table."""

    metrics: CampaignMetrics | None
    flagged: int
    imports: list[ImportJob]
    gold_rows: list[dict[str, Any]]
    gold_hidden: int

    @property
    def data(self) -> dict[str, Any] | None:
        """The metrics snapshot's figures (the template's ``m``)."""
        return self.metrics.data if self.metrics is not None else None


def campaign_metrics(campaign: Campaign) -> CampaignMetrics | None:
    return CampaignMetrics.objects.filter(campaign=campaign).first()


def campaign_overview(campaign: Campaign) -> CampaignOverview:
    """Four queries whatever the campaign's size."""
    metrics = campaign_metrics(campaign)
    flagged = Membership.objects.filter(campaign=campaign, quality_flagged_at__isnull=False).count()
    rows, hidden = _gold_rows(campaign, metrics.data.get("gold_by_labeler", []) if metrics else [])
    return CampaignOverview(metrics, flagged, list(ImportJob.objects.filter(campaign=campaign)[:5]), rows, hidden)


def _gold_rows(campaign: Campaign, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The gold table's labelers: members first, then labelers known only from imported labels (marked
    ``imported``); an imported labeler with no gold item is left out (its row would be all n=0), counted instead."""
    members = set(Membership.objects.filter(campaign=campaign).values_list("user_id", flat=True))
    shown, hidden = [], 0
    for row in rows:
        imported = row["labeler_id"] not in members
        if imported and not any(isinstance(v, dict) and v.get("items") for v in row.values()):
            hidden += 1
            continue
        shown.append({**row, "imported": imported})
    shown.sort(key=lambda row: row["imported"])
    return shown, hidden


@dataclass(frozen=True)
class LabelerRecord:
    """One labeler of a campaign as the admins' labeler page shows them."""

    membership: Membership
    recent: list[Assignment]
    metrics: CampaignMetrics | None
    gold: dict[str, Any] | None
    over_time: list[Any] | None
    counts: dict[str, int]

    @property
    def submitted(self) -> int:
        return self.counts.get(AssignmentStatus.SUBMITTED, 0)


def labeler_record(campaign: Campaign, user_id: int) -> LabelerRecord | None:
    """The labeler's membership, latest 50 assignments, gold figures and counts by status; None for a non-member."""
    membership = campaign_member(campaign, user_id)
    if membership is None:
        return None
    theirs = Assignment.objects.filter(solution__campaign=campaign, labeler_id=user_id)
    metrics = campaign_metrics(campaign)
    gold = over_time = None
    if metrics:
        gold = next((row for row in metrics.data.get("gold_by_labeler", []) if row["labeler_id"] == user_id), None)
        over_time = metrics.data.get("quality_over_time", {}).get(str(user_id), [])
    return LabelerRecord(
        membership, list(theirs.select_related("solution").order_by("-finished_at", "-id")[:50]), metrics, gold,
        over_time, dict(theirs.values_list("status").annotate(n=Count("id")).order_by()))


def campaign_member(campaign: Campaign, user_id: int) -> Membership | None:
    return Membership.objects.select_related("user").filter(campaign=campaign, user_id=user_id).first()


def import_jobs(campaign: Campaign, limit: int = 50) -> list[ImportJob]:
    return list(ImportJob.objects.filter(campaign=campaign).select_related("created_by")[:limit])


def import_job(campaign: Campaign, pk: int) -> ImportJob | None:
    return ImportJob.objects.filter(campaign=campaign, pk=pk).first()


def campaign_solution(campaign: Campaign, pk: int) -> Solution | None:
    """One of the campaign's solutions with its problem (and campaign)."""
    return Solution.objects.select_related("problem", "campaign").filter(campaign=campaign, pk=pk).first()

"""Adjudication: find overlapped solutions where labelers disagree, and let a reviewer set resolved labels.

Resolved labels (``ResolvedLabel``, one per step) sit beside the raw ratings and never change them; exports
choose raw or resolved labels (``rewards.exports.ExportOptions.labels``).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, QuerySet

from ..models import Assignment, AssignmentStatus, Campaign, Completion, Rating, ResolvedLabel, Solution, Step
from ..scales import campaign_scale
from .campaigns import CampaignAdminError


def _finished(campaign: Campaign) -> QuerySet[Assignment]:
    return Assignment.objects.filter(solution__campaign=campaign, status=AssignmentStatus.SUBMITTED, is_gold=False)


def disagreement_solution_ids(campaign: Campaign) -> list[int]:
    """Solutions where two finished labelings gave the same completion different ratings."""
    ratings = Rating.objects.filter(assignment__in=_finished(campaign), rating__isnull=False)
    disputed = (ratings.values("completion_id").annotate(values=Count("rating", distinct=True))
                .filter(values__gt=1).values("completion__step__solution_id"))
    return list(Solution.objects.filter(pk__in=disputed).order_by("pk").values_list("pk", flat=True))


@dataclass
class DisagreementSummary:
    solution: Solution
    labelings: int
    resolved_steps: int
    steps: int


def disagreements(campaign: Campaign, *, limit: int = 200) -> list[DisagreementSummary]:
    ids = disagreement_solution_ids(campaign)[:limit]
    solutions = (Solution.objects.filter(pk__in=ids).select_related("problem")
                 .annotate(n_steps=Count("steps", distinct=True),
                           n_resolved=Count("resolved_labels", distinct=True)).order_by("pk"))
    labelings = dict(_finished(campaign).filter(solution_id__in=ids).values_list("solution_id")
                     .annotate(n=Count("id")).order_by())
    return [DisagreementSummary(s, labelings.get(s.pk, 0), s.n_resolved, s.n_steps) for s in solutions]


@dataclass
class ReviewColumn:
    assignment_id: int
    labeler: str
    finish_reason: str | None


@dataclass
class ReviewRow:
    index: int
    texts: list[str]  # completion texts, by completion index
    cells: list[list[tuple[int, int | None]]]  # per column: (completion index, rating) it gave
    resolved: int | None
    disagree: bool
    note: str = ""

    @property
    def number(self) -> int:
        return self.index + 1


@dataclass
class Review:
    solution: Solution
    columns: list[ReviewColumn]
    rows: list[ReviewRow] = field(default_factory=list)


def review(solution: Solution) -> Review:
    """The steps of a solution side by side with each labeler's ratings and the resolved label (5 queries)."""
    assignments = list(_finished(solution.campaign).filter(solution=solution).select_related("labeler")
                       .order_by("pk"))
    columns = [ReviewColumn(a.pk, a.labeler.username if a.labeler else "—", a.finish_reason) for a in assignments]
    ratings: dict[tuple[int, int], dict[int, int | None]] = defaultdict(dict)  # (assignment, step) -> ratings
    for assignment_id, step_index, completion_index, rating in Rating.objects.filter(
            assignment__in=[a.pk for a in assignments]).values_list(
            "assignment_id", "completion__step__index", "completion__index", "rating"):
        ratings[(assignment_id, step_index)][completion_index] = rating
    texts: dict[int, list[str]] = defaultdict(list)
    for step_index, text in Completion.objects.filter(step__solution=solution).order_by(
            "step__index", "index").values_list("step__index", "text"):
        texts[step_index].append(text)
    resolved = {label.step.index: label for label in ResolvedLabel.objects.filter(solution=solution)
                .select_related("step")}
    result = Review(solution, columns)
    for step in Step.objects.filter(solution=solution).order_by("index"):
        cells = [sorted(ratings.get((a.pk, step.index), {}).items()) for a in assignments]
        by_completion: dict[int, set[int]] = defaultdict(set)
        for cell in cells:
            for completion_index, rating in cell:
                if rating is not None:
                    by_completion[completion_index].add(rating)
        label = resolved.get(step.index)
        result.rows.append(ReviewRow(step.index, texts.get(step.index, []), cells,
                                     label.rating if label else None,
                                     any(len(values) > 1 for values in by_completion.values()),
                                     label.note if label else ""))
    return result


@transaction.atomic
def set_resolved_label(solution: Solution, step_index: int, rating: int | None, reviewer: User,
                       note: str = "") -> ResolvedLabel | None:
    """Set (or, with ``rating`` None, clear) a step's resolved label; the raw ratings stay as they are."""
    scale = campaign_scale(solution.campaign)
    if rating is not None and rating not in scale.allowed:
        raise CampaignAdminError(f"steps[{step_index}].rating",
                                 f"must be {', '.join(map(str, scale.ordinal[:-1]))} or {scale.ordinal[-1]}, "
                                 f"got {rating!r}")
    step = Step.objects.filter(solution=solution, index=step_index).first()
    if step is None:
        raise CampaignAdminError("step", f"solution {solution.pk} has no step {step_index}")
    if rating is None:
        ResolvedLabel.objects.filter(step=step).delete()
        return None
    label, _ = ResolvedLabel.objects.update_or_create(
        step=step, defaults={"solution": solution, "rating": rating, "reviewer": reviewer, "note": note})
    return label


def set_resolved_labels(solution: Solution, values: dict[int, int | None], reviewer: User,
                        notes: dict[int, str] | None = None) -> int:
    """Save a whole review form at once (all or nothing); returns how many steps carry a resolved label."""
    with transaction.atomic():
        for step_index, rating in sorted(values.items()):
            set_resolved_label(solution, step_index, rating, reviewer, (notes or {}).get(step_index, ""))
    return ResolvedLabel.objects.filter(solution=solution).count()


def resolved_step_ratings(solution_ids: Iterable[int]) -> dict[int, dict[int, int]]:
    """For adjudicated solutions among ``solution_ids``: step index -> rating, where a step's rating is the
    reviewer's resolved label, else the finished labelers' unanimous rating of its first completion.

    Steps with neither are missing: a resolved export row stops before them.
    """
    ids = list(set(solution_ids))
    resolved: dict[int, dict[int, int]] = defaultdict(dict)
    for solution_id, index, rating in ResolvedLabel.objects.filter(solution_id__in=ids).values_list(
            "solution_id", "step__index", "rating"):
        resolved[solution_id][index] = rating
    if not resolved:
        return {}
    raw: dict[tuple[int, int], set[Any]] = defaultdict(set)
    for solution_id, index, given in Rating.objects.filter(
            assignment__solution_id__in=list(resolved), assignment__status=AssignmentStatus.SUBMITTED,
            assignment__is_gold=False, completion__index=0, rating__isnull=False).values_list(
            "assignment__solution_id", "completion__step__index", "rating"):
        raw[(solution_id, index)].add(given)
    for (solution_id, index), values in raw.items():
        if len(values) == 1:
            resolved[solution_id].setdefault(index, next(iter(values)))
    return dict(resolved)

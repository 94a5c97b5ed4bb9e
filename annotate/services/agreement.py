"""Label-quality metrics: agreement with gold, inter-annotator agreement, quality over time, time spent.

Every figure carries the number of items it rests on (``Figure.items``): a kappa over three solutions means
little, and the dashboard says so. The pure functions at the top take plain lists so they can be checked
against hand-computed cases and reference implementations; ``load_labelings`` turns a campaign into those
lists with a fixed number of queries, and ``compute_campaign_metrics`` (run by a Celery task, cached in
``CampaignMetrics``) puts everything together.

Conventions (the same as ``annotate.services.quality``):
* a labeling's *first error* is the lowest step index with any completion rated −1; −1 when the labeler
  finished with "solution"; None when they gave up or flagged a bad problem (no verdict);
* a step is *bad* for a labeler when any of its completions got −1 from them;
* the *verdict* is ``found_error`` (first error ≥ 0) or ``solution`` (first error −1).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from itertools import combinations
from typing import Any

import krippendorff
import numpy as np
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from ..labelsources import says_correct
from ..models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMetrics,
    FinishReason,
    MachineLabel,
    Membership,
    Rating,
    Role,
    Solution,
)
from ..scales import PM1, campaign_scale
from ..selectors import domain_results
from .machine_labels import first_error, labels_by_solution, source_kind

ORDINAL_SCALE = PM1.ordinal


@dataclass(frozen=True)
class Figure:
    """A metric value and the number of items it was computed from (value None: nothing to compute on)."""

    value: float | None
    items: int

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "items": self.items}


# --- pure metrics -------------------------------------------------------------------------------------------

def krippendorff_alpha_ordinal(units: Iterable[Sequence[int]], scale: Sequence[int] = ORDINAL_SCALE) -> Figure:
    """Krippendorff's alpha, ordinal on the campaign's scale (−1/0/+1 by default), over units (each the ratings
    several labelers gave one item).

    Uses the maintained ``krippendorff`` package on a value-count matrix (units × scale values), which is
    independent of who the raters were and stays small for many labelers. Units with fewer than two
    ratings are not pairable and do not count.
    """
    rows = []
    for ratings in units:
        if len(ratings) < 2:
            continue
        rows.append([sum(1 for r in ratings if r == v) for v in scale])
    if not rows:
        return Figure(None, 0)
    counts = np.asarray(rows, dtype=float)
    if np.count_nonzero(counts.sum(axis=0)) < 2:  # one value in all the data: no variation, alpha undefined
        return Figure(None, len(rows))
    try:
        value = float(krippendorff.alpha(value_counts=counts, level_of_measurement="ordinal",
                                         value_domain=list(scale)))
    except (ValueError, ZeroDivisionError):
        return Figure(None, len(rows))
    return Figure(None if math.isnan(value) else value, len(rows))


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> Figure:
    """Cohen's kappa of two ratings per item (for overlap k ≥ 2: the first two labelings of each solution)."""
    n = len(pairs)
    if n == 0:
        return Figure(None, 0)
    categories = sorted({c for pair in pairs for c in pair})
    observed = sum(a == b for a, b in pairs) / n
    expected = sum((sum(a == c for a, _ in pairs) / n) * (sum(b == c for _, b in pairs) / n) for c in categories)
    if expected == 1:
        return Figure(None, n)
    return Figure((observed - expected) / (1 - expected), n)


def fleiss_kappa(items: Iterable[Sequence[str]]) -> Figure:
    """Fleiss' kappa over items rated by ≥ 2 labelers; a varying number of ratings per item is allowed
    (per-item agreement uses that item's own count; with a constant count this is Fleiss' original)."""
    usable = [list(item) for item in items if len(item) >= 2]
    if not usable:
        return Figure(None, 0)
    categories = sorted({c for item in usable for c in item})
    total = sum(len(item) for item in usable)
    agreement = 0.0
    for item in usable:
        n = len(item)
        agreement += sum(item.count(c) * (item.count(c) - 1) for c in categories) / (n * (n - 1))
    p_bar = agreement / len(usable)
    p_e = sum((sum(item.count(c) for item in usable) / total) ** 2 for c in categories)
    if p_e == 1:
        return Figure(None, len(usable))
    return Figure((p_bar - p_e) / (1 - p_e), len(usable))


def first_error_agreement(items: Iterable[Sequence[int]], *, tolerance: int = 0) -> Figure:
    """Share of labeler pairs (within each overlapped solution) whose first-error positions agree.

    With ``tolerance`` 1, positions one step apart agree too (but "no error" (−1) only agrees with itself).
    """
    agree = pairs = solutions = 0
    for positions in items:
        if len(positions) < 2:
            continue
        solutions += 1
        for a, b in combinations(positions, 2):
            pairs += 1
            if a == b or (tolerance and a >= 0 and b >= 0 and abs(a - b) <= tolerance):
                agree += 1
    return Figure(agree / pairs if pairs else None, solutions)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))


def share(hits: Sequence[bool]) -> Figure:
    return Figure(sum(hits) / len(hits) if hits else None, len(hits))


# --- loading a campaign's labelings -------------------------------------------------------------------------

@dataclass
class Labeling:
    assignment_id: int
    labeler_id: int | None
    solution_id: int
    group: str  # labelings of the same steps: the content digest, else the solution
    finish_reason: str | None
    finished_at: datetime | None
    total_time_ms: int | None
    # step index -> {completion index: rating}
    ratings: dict[int, dict[int, int | None]] = field(default_factory=dict)
    errors: frozenset[int] = PM1.error_values  # the campaign scale's error values (PRM800K: −1)

    @property
    def first_error(self) -> int | None:
        if self.finish_reason in (FinishReason.BAD_PROBLEM, FinishReason.GIVE_UP):
            return None
        bad = [index for index, by_completion in self.ratings.items() if self.errors & set(by_completion.values())]
        if bad:
            return min(bad)
        return -1 if self.finish_reason == FinishReason.SOLUTION else None

    @property
    def verdict(self) -> str | None:
        first = self.first_error
        return None if first is None else ("found_error" if first >= 0 else "solution")

    def step_is_bad(self, index: int) -> bool | None:
        by_completion = self.ratings.get(index)
        rated = [r for r in (by_completion or {}).values() if r is not None]
        return None if not rated else bool(self.errors.intersection(rated))


@dataclass
class CampaignLabelings:
    labelings: list[Labeling]
    gold: dict[int, int]  # solution id -> gold first-error index (−1 = no error)
    step_times_ms: list[int]


def load_labelings(campaign: Campaign) -> CampaignLabelings:
    """All finished, non-gold labelings of a campaign with their ratings, and the gold answers (4 queries)."""
    assignments = Assignment.objects.filter(
        solution__campaign=campaign, status=AssignmentStatus.SUBMITTED, is_gold=False,
    ).values_list("id", "labeler_id", "solution_id", "solution__content_sha256", "finish_reason", "finished_at",
                  "total_time_ms")
    by_id: dict[int, Labeling] = {}
    errors = campaign_scale(campaign).error_values
    for pk, labeler_id, solution_id, digest, reason, finished_at, total in assignments.iterator(chunk_size=5000):
        by_id[pk] = Labeling(pk, labeler_id, solution_id, digest or f"solution:{solution_id}", reason, finished_at,
                             total, errors=errors)
    step_times: list[int] = []
    ratings = Rating.objects.filter(
        assignment__solution__campaign=campaign, assignment__status=AssignmentStatus.SUBMITTED,
        assignment__is_gold=False,
    ).values_list("assignment_id", "completion__step__index", "completion__index", "rating", "time_ms")
    for assignment_id, step_index, completion_index, rating, time_ms in ratings.iterator(chunk_size=20000):
        labeling = by_id.get(assignment_id)
        if labeling is None:
            continue
        labeling.ratings.setdefault(step_index, {})[completion_index] = rating
        if time_ms is not None and rating is not None:
            step_times.append(time_ms)
    gold = {pk: first_error for pk, first_error in Solution.objects.filter(
        campaign=campaign, gold_first_error__isnull=False).values_list("id", "gold_first_error")
        if first_error is not None}
    # Solutions whose gold is a gold labeling rather than a stored index.
    gold_assignments = Assignment.objects.filter(
        solution__campaign=campaign, status=AssignmentStatus.SUBMITTED, is_gold=True,
        solution__gold_first_error__isnull=True,
    ).values_list("id", "solution_id", "finish_reason")
    gold_labelings = {pk: Labeling(pk, None, sid, "", reason, None, None, errors=errors)
                      for pk, sid, reason in gold_assignments}
    if gold_labelings:
        for assignment_id, step_index, completion_index, rating in Rating.objects.filter(
                assignment_id__in=list(gold_labelings)).values_list(
                "assignment_id", "completion__step__index", "completion__index", "rating"):
            gold_labelings[assignment_id].ratings.setdefault(step_index, {})[completion_index] = rating
        for labeling in gold_labelings.values():
            if labeling.first_error is not None:
                gold.setdefault(labeling.solution_id, labeling.first_error)
    return CampaignLabelings(list(by_id.values()), gold, step_times)


# --- campaign metrics ---------------------------------------------------------------------------------------

@dataclass
class GoldAgreement:
    step_accuracy: Figure
    first_error_exact: Figure
    first_error_within_one: Figure
    verdict_accuracy: Figure

    def as_dict(self) -> dict[str, Any]:
        return {key: value.as_dict() for key, value in vars(self).items()}


def within_one(labeler: int | None, gold: int) -> bool:
    if labeler is None:
        return False
    if gold == -1 or labeler == -1:
        return labeler == gold
    return abs(labeler - gold) <= 1


def gold_agreement(labelings: Iterable[Labeling], gold: dict[int, int]) -> GoldAgreement:
    """Agreement of some labelings with gold: step accuracy (bad / not bad, up to the gold first error),
    first-error exact and within ±1 (a give-up counts as a miss), verdict accuracy (give-ups excluded)."""
    steps: list[bool] = []
    exact: list[bool] = []
    near: list[bool] = []
    verdicts: list[bool] = []
    for labeling in labelings:
        gold_first = gold.get(labeling.solution_id)
        if gold_first is None:
            continue
        first = labeling.first_error
        exact.append(first == gold_first)
        near.append(within_one(first, gold_first))
        if labeling.verdict is not None:
            verdicts.append(labeling.verdict == ("found_error" if gold_first >= 0 else "solution"))
        for index in sorted(labeling.ratings):
            if gold_first >= 0 and index > gold_first:
                break
            bad = labeling.step_is_bad(index)
            if bad is not None:
                steps.append(bad == (index == gold_first))
    return GoldAgreement(share(steps), share(exact), share(near), share(verdicts))


def gold_agreement_by_labeler(data: CampaignLabelings) -> dict[int, GoldAgreement]:
    by_labeler: dict[int, list[Labeling]] = defaultdict(list)
    for labeling in data.labelings:
        if labeling.labeler_id is not None:
            by_labeler[labeling.labeler_id].append(labeling)
    return {labeler: gold_agreement(items, data.gold) for labeler, items in by_labeler.items()}


@dataclass
class InterAnnotator:
    alpha_ordinal: Figure
    cohen_kappa_verdict: Figure
    fleiss_kappa_verdict: Figure
    first_error_exact: Figure
    first_error_within_one: Figure
    overlapped_solutions: int

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v.as_dict() for k, v in vars(self).items() if isinstance(v, Figure)}
        out["overlapped_solutions"] = self.overlapped_solutions
        return out


def overlapped_groups(labelings: Iterable[Labeling]) -> dict[str, list[Labeling]]:
    """Labelings grouped by the steps they rated, keeping groups with two or more distinct labelers."""
    groups: dict[str, list[Labeling]] = defaultdict(list)
    for labeling in labelings:
        groups[labeling.group].append(labeling)
    return {key: sorted(items, key=lambda item: item.assignment_id) for key, items in groups.items()
            if len({item.labeler_id for item in items}) >= 2}


def inter_annotator_agreement(labelings: Iterable[Labeling],
                              scale: Sequence[int] = ORDINAL_SCALE) -> InterAnnotator:
    groups = overlapped_groups(labelings)
    units: list[list[int]] = []
    pairs: list[tuple[str, str]] = []
    verdict_items: list[list[str]] = []
    first_errors: list[list[int]] = []
    for items in groups.values():
        by_unit: dict[tuple[int, int], list[int]] = defaultdict(list)
        for labeling in items:
            for step_index, by_completion in labeling.ratings.items():
                for completion_index, rating in by_completion.items():
                    if rating is not None:
                        by_unit[(step_index, completion_index)].append(rating)
        units.extend(by_unit.values())
        verdicts = [v for v in (item.verdict for item in items) if v is not None]
        if len(verdicts) >= 2:
            pairs.append((verdicts[0], verdicts[1]))
            verdict_items.append(verdicts)
        first_errors.append([f for f in (item.first_error for item in items) if f is not None])
    return InterAnnotator(
        alpha_ordinal=krippendorff_alpha_ordinal(units, scale),
        cohen_kappa_verdict=cohen_kappa(pairs),
        fleiss_kappa_verdict=fleiss_kappa(verdict_items),
        first_error_exact=first_error_agreement(first_errors),
        first_error_within_one=first_error_agreement(first_errors, tolerance=1),
        overlapped_solutions=len(groups),
    )


def machine_agreement(labelings: Iterable[Labeling], campaign: Campaign) -> dict[str, dict[str, Any]]:
    """Per machine source: how often the humans agree with it, on steps (a human +1/0 is "correct", as the
    neutral-as-correct rule has it) and on the first error of a solution, over the finished labelings of the
    solutions it labels; plus how many steps and solutions it labels in the campaign."""
    by_solution = labels_by_solution(MachineLabel.objects.filter(solution__campaign=campaign)
                                     .values_list("solution_id", flat=True).distinct())
    steps: dict[str, list[bool]] = defaultdict(list)
    firsts: dict[str, list[bool]] = defaultdict(list)
    for labeling in labelings:
        for key, values in by_solution.get(labeling.solution_id, {}).items():
            kind = source_kind(key)
            for index, by_completion in labeling.ratings.items():
                human = by_completion.get(0)
                if human is not None and index in values:
                    steps[key].append((human >= 0) == says_correct(kind, values[index]))
            if labeling.first_error is not None:
                firsts[key].append(labeling.first_error == first_error(kind, values))
    sources: dict[str, dict[str, int]] = defaultdict(lambda: {"solutions": 0, "step_labels": 0})
    for labels in by_solution.values():
        for key, values in labels.items():
            sources[key]["solutions"] += 1
            sources[key]["step_labels"] += len(values)
    return {key: {**counts, "step_agreement": share(steps[key]).as_dict(),
                  "first_error_agreement": share(firsts[key]).as_dict()}
            for key, counts in sorted(sources.items())}


def week_of(moment: datetime) -> date:
    day = timezone.localtime(moment).date() if timezone.is_aware(moment) else moment.date()
    return day - timedelta(days=day.weekday())


def quality_over_time(data: CampaignLabelings) -> dict[int, list[dict[str, Any]]]:
    """Per labeler and week (Monday): first-error exact agreement with gold, with its item count."""
    buckets: dict[int, dict[date, list[Labeling]]] = defaultdict(lambda: defaultdict(list))
    for labeling in data.labelings:
        if labeling.labeler_id is None or labeling.finished_at is None or labeling.solution_id not in data.gold:
            continue
        buckets[labeling.labeler_id][week_of(labeling.finished_at)].append(labeling)
    return {
        labeler: [{"week": week.isoformat(), **gold_agreement(items, data.gold).first_error_exact.as_dict()}
                  for week, items in sorted(weeks.items())]
        for labeler, weeks in buckets.items()
    }


def time_stats(data: CampaignLabelings) -> dict[str, Any]:
    solutions = [item.total_time_ms for item in data.labelings if item.total_time_ms is not None]
    return {
        "per_solution_ms": {"median": percentile(solutions, 50), "p90": percentile(solutions, 90),
                            "items": len(solutions)},
        "per_step_ms": {"median": percentile(data.step_times_ms, 50), "p90": percentile(data.step_times_ms, 90),
                        "items": len(data.step_times_ms)},
    }


def is_below_threshold(campaign: Campaign, exact: Figure) -> bool:
    return (exact.value is not None and exact.items >= campaign.quality_min_items
            and exact.value < campaign.quality_threshold)


@transaction.atomic
def flag_low_quality(campaign: Campaign, by_labeler: dict[int, GoldAgreement],
                     now: datetime | None = None) -> list[int]:
    """Flag labelers whose first-error agreement with gold is below the campaign's threshold (after enough
    gold items); pause them too when the campaign asks. Recovered labelers are unflagged (not unpaused:
    an admin decides that). Returns the flagged user ids."""
    now = now or timezone.now()
    low = sorted(labeler for labeler, result in by_labeler.items()
                 if is_below_threshold(campaign, result.first_error_exact))
    labelers = Membership.objects.filter(campaign=campaign, role=Role.LABELER)
    labelers.filter(user_id__in=low, quality_flagged_at__isnull=True).update(quality_flagged_at=now)
    if campaign.pause_below_threshold:
        labelers.filter(user_id__in=low).update(is_paused=True)
    labelers.exclude(user_id__in=low).filter(quality_flagged_at__isnull=False).update(quality_flagged_at=None)
    return low


def compute_campaign_metrics(campaign: Campaign, *, flag: bool = True) -> CampaignMetrics:
    """Everything the dashboard shows that is too slow for a page view; stored as the campaign's snapshot."""
    started = timezone.now()
    data = load_labelings(campaign)
    by_labeler = gold_agreement_by_labeler(data)
    flagged = flag_low_quality(campaign, by_labeler) if flag else []
    usernames = dict(get_user_model().objects.filter(pk__in=list(by_labeler)).values_list("pk", "username"))
    result = {
        "labelings": len(data.labelings),
        "ratings": sum(len(v) for item in data.labelings for v in item.ratings.values()),
        "gold_solutions": len(data.gold),
        "gold_overall": gold_agreement(data.labelings, data.gold).as_dict(),
        "gold_by_labeler": [
            {"labeler_id": labeler, "username": usernames.get(labeler, str(labeler)), **result.as_dict(),
             "flagged": labeler in flagged}
            for labeler, result in sorted(by_labeler.items(), key=lambda kv: usernames.get(kv[0], ""))
        ],
        "inter_annotator": inter_annotator_agreement(data.labelings, campaign_scale(campaign).ordinal).as_dict(),
        "machine_agreement": machine_agreement(data.labelings, campaign),
        "quality_over_time": {str(k): v for k, v in quality_over_time(data).items()},
        "time": time_stats(data),
        "flagged": flagged,
        **domain_results(campaign),
    }
    duration = int((timezone.now() - started).total_seconds() * 1000)
    metrics, _ = CampaignMetrics.objects.update_or_create(
        campaign=campaign, defaults={"data": result, "computed_at": timezone.now(), "duration_ms": duration})
    return metrics



def _recompute_key(campaign: Campaign) -> str:
    return f"steplab:metrics-requested:{campaign.pk}"


def request_recompute(campaign: Campaign) -> bool:
    """Queue the campaign's metrics now and remember when, so the dashboard shows the recompute until it is done;
    False when the broker is unreachable (the scheduled run refreshes them)."""
    from steplab.celery import send_task

    from ..tasks import compute_campaign_metrics_task

    if send_task(compute_campaign_metrics_task, args=[campaign.pk]) is None:
        return False
    cache.set(_recompute_key(campaign), timezone.now(), timeout=24 * 3600)
    return True


def recompute_pending_since(campaign: Campaign, metrics: CampaignMetrics | None) -> datetime | None:
    """When a requested recompute was asked for, while the stored metrics are older than that request."""
    requested: datetime | None = cache.get(_recompute_key(campaign))
    if requested is None or (metrics is not None and metrics.computed_at >= requested):
        return None
    return requested

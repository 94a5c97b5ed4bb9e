"""Gold-standard checks: first-error agreement with gold on QC and screening solutions."""
from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Min

from ..models import Assignment, AssignmentStatus, FinishReason, Membership, Rating, Solution


@dataclass(frozen=True)
class GoldComparison:
    solution_id: int
    gold_first_error: int
    labeler_first_error: int | None  # None: the labeler gave up / flagged a bad problem

    @property
    def exact(self) -> bool:
        return self.labeler_first_error == self.gold_first_error

    @property
    def within_one(self) -> bool:
        if self.labeler_first_error is None:
            return False
        if self.gold_first_error == -1 or self.labeler_first_error == -1:
            return self.exact
        return abs(self.labeler_first_error - self.gold_first_error) <= 1


def first_error_of(assignment: Assignment) -> int | None:
    """Index of the first step rated −1 (on any completion), −1 for a clean solution, None otherwise."""
    if assignment.finish_reason in (FinishReason.BAD_PROBLEM, FinishReason.GIVE_UP):
        return None
    first = Rating.objects.filter(assignment=assignment, rating=-1).aggregate(first=Min("completion__step__index"))
    if first["first"] is not None:
        return int(first["first"])
    return -1 if assignment.finish_reason == FinishReason.SOLUTION else None


def gold_first_error(solution: Solution) -> int | None:
    """The solution's gold first-error index: the stored one, else that of its gold labeling."""
    if solution.gold_first_error is not None:
        return solution.gold_first_error
    gold = solution.assignments.filter(is_gold=True, status=AssignmentStatus.SUBMITTED).first()
    return first_error_of(gold) if gold else None


def compare_with_gold(assignment: Assignment) -> GoldComparison | None:
    gold = gold_first_error(assignment.solution)
    if gold is None:
        return None
    return GoldComparison(assignment.solution_id, gold, first_error_of(assignment))


def screening_score(membership: Membership) -> tuple[float, int]:
    """Share of the screening set where the labeler found the gold first error exactly, and its size."""
    done = Assignment.objects.filter(
        labeler=membership.user, solution__campaign=membership.campaign, solution__is_screening=True,
        status=AssignmentStatus.SUBMITTED, is_gold=False,
    ).select_related("solution")
    comparisons = [c for c in (compare_with_gold(a) for a in done) if c is not None]
    if not comparisons:
        return 0.0, 0
    return sum(c.exact for c in comparisons) / len(comparisons), len(comparisons)


def decide_screening(membership: Membership) -> bool:
    """Grade a finished screening set and record pass/fail on the membership."""
    score, count = screening_score(membership)
    passed = count > 0 and score >= membership.campaign.screening_pass_threshold
    if count == 0:  # a screening set without gold cannot fail anyone
        passed = True
    Membership.objects.filter(pk=membership.pk).update(passed_screening=passed)
    membership.passed_screening = passed
    return passed


def after_gold_assignment(assignment_id: int) -> None:
    """After a screening solution is finished: decide once the labeler has done the whole set."""
    assignment = Assignment.objects.select_related("solution__campaign").filter(pk=assignment_id).first()
    if assignment is None or not assignment.solution.is_screening or assignment.labeler_id is None:
        return
    membership = Membership.objects.filter(campaign=assignment.solution.campaign,
                                           user_id=assignment.labeler_id).first()
    if membership is None or membership.passed_screening is not None:
        return
    remaining = Solution.objects.filter(campaign=membership.campaign, is_screening=True).exclude(
        assignments__labeler_id=assignment.labeler_id, assignments__status=AssignmentStatus.SUBMITTED)
    if not remaining.exists():
        with transaction.atomic():
            decide_screening(membership)

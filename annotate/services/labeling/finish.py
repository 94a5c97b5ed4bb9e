"""The end of a pass: submit or finish it under the rules a finish checks (every step rated, a −1 for "found
error", reasons where required, the final answer rated where people grade), and the rating of the final answer."""
from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from stepcore.graders import graded_by_people
from steplab import events

from ...models import Assignment, AssignmentStatus, Campaign, FinishReason, Rating, Solution, StepRationale
from ...scales import campaign_scale
from ...workspace import Progress, User, decisions_of, pass_progress, ratings_of
from ..errors import LabelingError
from .lock import locked_open_assignment


def finish_pass(assignment: Assignment, *, reason: str, text: str, now: datetime,
                total_time_ms: int | None = None) -> None:
    """Write the end of a checked pass; the solution's outcome, the event and the gold follow-up after it."""
    assignment.status = AssignmentStatus.SUBMITTED
    assignment.finish_reason = reason
    assignment.finish_reason_text = text
    assignment.finished_at = now
    elapsed = int((now - assignment.started_at).total_seconds() * 1000) if assignment.started_at else None
    assignment.total_time_ms = total_time_ms if total_time_ms is not None else elapsed
    assignment.save(update_fields=["status", "finish_reason", "finish_reason_text", "finished_at",
                                   "total_time_ms", "lease_expires_at", "updated_at"])
    judged = reason in (FinishReason.SOLUTION, FinishReason.FOUND_ERROR)
    if judged and assignment.outcome_correct is not None and _graded_by_people(assignment.solution.campaign):
        # the latest labeler's rating of the final answer is the solution's outcome (the ORM's label)
        Solution.objects.filter(pk=assignment.solution_id).update(is_correct=assignment.outcome_correct)
    events.emit_on_commit(events.Name.LABELING_SUBMITTED, campaign_id=assignment.solution.campaign_id)
    if assignment.solution.is_screening or assignment.solution.is_quality_control:
        from ..quality import after_gold_assignment

        transaction.on_commit(lambda: after_gold_assignment(assignment.pk))


def finish_assignment(assignment_id: int, *, user: User, reason: str, text: str = "",
                      total_time_ms: int | None = None, now: datetime | None = None) -> Assignment:
    """End a labeler's pass: ``solution`` needs every step rated and no −1, ``found_error`` a −1 (stepwise,
    nothing rated after it by construction); bad problem/give up need a reason."""
    now = now or timezone.now()
    text = checked_finish(reason, text=text)
    judged = reason in (FinishReason.SOLUTION, FinishReason.FOUND_ERROR)
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=now, count_steps=judged)
        if judged:
            check_submittable(assignment, reason=reason)
        finish_pass(assignment, reason=reason, text=text, now=now, total_time_ms=total_time_ms)
    return assignment


def checked_finish(reason: str, *, text: str) -> str:
    """A finish reason's text as stored; refuses an unknown reason, and bad problem / give up without a text."""
    if reason not in FinishReason.values:
        raise LabelingError(f"Unknown finish reason {reason!r}.")
    text = (text or "").strip()
    if reason in (FinishReason.BAD_PROBLEM, FinishReason.GIVE_UP) and not text:
        raise LabelingError("Say why: a reason is required for “bad problem” and “give up”.")
    return text


def submit_assignment(assignment_id: int, *, user: User, total_time_ms: int | None = None,
                      now: datetime | None = None) -> Assignment:
    """The workspace's "Submit" control: a pass holding a −1 ends as ``found_error``, a complete one as
    ``solution``. Until this runs, a −1 can still be changed."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=now, count_steps=True)
        progress = check_submittable(assignment, reason=None)
        reason = FinishReason.FOUND_ERROR if progress.has_error else FinishReason.SOLUTION
        finish_pass(assignment, reason=reason, text="", now=now, total_time_ms=total_time_ms)
    return assignment


def check_submittable(assignment: Assignment, *, reason: str | None,
                       ratings: dict[tuple[int, int], Rating] | None = None) -> Progress:
    """Refuse a ``solution`` / ``found_error`` finish the pass does not support (``None``: whichever fits).
    ``ratings``: the stepwise pass's ratings when the caller holds them (else read here)."""
    stepwise = assignment.solution.campaign.is_stepwise
    if stepwise and ratings is None:
        ratings = ratings_of(assignment)
    # Set by annotate() in the query, which django-stubs does not follow.
    progress = pass_progress(assignment.step_total, stepwise,  # type: ignore[attr-defined]  # the step count comes with the lock
                         ratings or {}, {} if stepwise else decisions_of(assignment),
                         campaign_scale(assignment.solution.campaign).error_values)
    if reason == FinishReason.FOUND_ERROR and not progress.has_error:
        raise LabelingError("“Found error” needs a step rated −1.")
    if reason == FinishReason.SOLUTION and progress.has_error:
        raise LabelingError(f"Step {progress.first_error + 1} is rated −1: this solution ends as “found error”."
                            if progress.first_error is not None else "A step is rated −1.")
    if not progress.submittable:
        raise LabelingError(f"Rate every step (or give a −1) first ({progress.done} of {progress.total} rated)."
                            if stepwise else f"Choose or write a continuation at every step first ({progress.done} "
                            f"of {progress.total}).")
    if assignment.solution.campaign.step_rationale == StepRationale.REQUIRED:
        _check_rationales(assignment, stepwise)
    if _graded_by_people(assignment.solution.campaign) and assignment.outcome_correct is None:
        raise LabelingError("Rate the final answer first: is it correct or incorrect?")
    return progress


def _graded_by_people(campaign: Campaign) -> bool:
    """The campaign's grader has no ground truth: the labelers' rating of the final answer is the outcome."""
    return graded_by_people(campaign.grader)


def record_outcome(assignment_id: int, *, user: User, correct: bool | None,
                   now: datetime | None = None) -> Assignment:
    """The labeler's rating of the solution's final answer (campaigns graded by people; None clears it). When
    the pass is submitted it becomes the solution's outcome label."""
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=now or timezone.now())
        if not _graded_by_people(assignment.solution.campaign):
            raise LabelingError("This campaign grades final answers against a ground truth: there is no final "
                                "answer to rate.")
        assignment.outcome_correct = correct
        assignment.save(update_fields=["outcome_correct", "lease_expires_at", "updated_at"])
    return assignment


def _check_rationales(assignment: Assignment, stepwise: bool) -> None:
    """A campaign that requires reasons: every −1 of the pass carries one before it is submitted."""
    missing = (Rating.objects.filter(assignment=assignment, rationale="",
                                     rating__in=campaign_scale(assignment.solution.campaign).error_values)
               .order_by("completion__step__index", "completion__index")
               .values_list("completion__step__index", "completion__index").first())
    if missing is not None:
        step, candidate = missing
        where = f"Step {step + 1}" if stepwise else f"Step {step + 1}, candidate {candidate + 1},"
        raise LabelingError(f"{where} is rated −1 without a reason: this campaign requires a one-line reason for "
                            f"every −1. Type it in the step's reason field, then submit.")

"""What a labeler marks beside a rating: "Unsure" (``flag_step``), a bad split (``report_bad_split``) and, in
conversational mode, the continuation of a step (``decide_step``)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ...models import (
    RATIONALE_MAX_CHARS,
    Assignment,
    Completion,
    Rating,
    RatingRevision,
    SplitReport,
    Step,
    StepDecision,
)
from ...scales import campaign_scale
from ...workspace import User, continuations
from ..errors import LabelingError
from .lock import locked_open_assignment


def flag_step(assignment_id: int, *, user: User, step_index: int, flagged: bool,
              completion_index: int = 0) -> Rating:
    """Set or clear the "Unsure" mark (PRM800K's ``flagged``); a step can be marked before it is rated, but
    not after a −1 (stepwise: those steps are out of the pass)."""
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=timezone.now())
        completion = Completion.objects.filter(step__solution_id=assignment.solution_id, step__index=step_index,
                                               index=completion_index).first()
        if completion is None:
            raise LabelingError(f"Step {step_index} has no completion {completion_index}.")
        error = (Rating.objects.filter(assignment=assignment,
                                       rating__in=campaign_scale(assignment.solution.campaign).error_values,
                                       completion__index=0,
                                       completion__step__index__lt=step_index)
                 .order_by("completion__step__index").values_list("completion__step__index", flat=True).first()
                 if assignment.solution.campaign.is_stepwise else None)
        if error is not None:
            raise LabelingError(f"Step {error + 1} is rated −1: the steps after it are not part of this pass.")
        current, created = Rating.objects.get_or_create(assignment=assignment, completion=completion,
                                                        defaults={"flagged": flagged})
        if not created and current.flagged != flagged:
            RatingRevision.objects.create(rating=current, assignment=assignment, completion=completion,
                                          previous_rating=current.rating, previous_flagged=current.flagged,
                                          changed_by_id=user.pk)
            current.flagged = flagged
            current.save(update_fields=["flagged", "updated_at"])
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
        return current


def report_bad_split(assignment_id: int, *, user: User, step_index: int, reported: bool = True,
                     note: str = "") -> Assignment:
    """Flag (or unflag) a step of the labeler's open pass as a bad split, with an optional one-line note. The
    flag is about the step boundaries, not the rating, so any step of the pass can carry it."""
    note = note.strip()
    if "\n" in note or "\r" in note or len(note) > RATIONALE_MAX_CHARS:
        raise LabelingError(f"The bad-split note must be one line of at most {RATIONALE_MAX_CHARS} characters.")
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=timezone.now())
        step = Step.objects.filter(solution_id=assignment.solution_id, index=step_index).first()
        if step is None:
            raise LabelingError(f"There is no step {step_index}.")
        if reported:
            SplitReport.objects.update_or_create(assignment=assignment, step=step, defaults={"note": note})
        else:
            SplitReport.objects.filter(assignment=assignment, step=step).delete()
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
    return assignment


def decide_step(assignment_id: int, *, user: User, step_index: int, chosen_completion: int | None = None,
                human_text: str | None = None) -> StepDecision:
    """Conversational mode: continue with a rated completion, or write one's own step."""
    if (chosen_completion is None) == (human_text is None or not human_text.strip()):
        raise LabelingError("Choose one completion or write your own step (exactly one of the two).")
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=timezone.now())
        step = Step.objects.filter(solution_id=assignment.solution_id, index=step_index).first()
        if step is None:
            raise LabelingError(f"There is no step {step_index}.")
        completions = list(step.completions.values_list("id", "index"))
        ratings = dict(
            Rating.objects.filter(assignment=assignment, completion__step=step).values_list("completion__index",
                                                                                           "rating")
        )
        allowed = continuations({index: ratings.get(index) for _, index in completions},
                                campaign_scale(assignment.solution.campaign))
        if not allowed.all_rated:
            raise LabelingError("Rate every completion of this step first.")
        if chosen_completion is not None:
            if chosen_completion not in {index for _, index in completions}:
                raise LabelingError(f"Step {step_index} has no completion {chosen_completion}.")
            if chosen_completion not in allowed.choosable:
                raise LabelingError("You cannot continue with a completion you rated −1.")
            human = None
        else:
            if not allowed.can_write:
                raise LabelingError("A completion is rated +1: continue with it instead of writing your own.")
            assert human_text is not None  # checked on entry: exactly one of the two is given
            human = {"text": human_text.strip(), "rating": None, "source": "human", "flagged": False}
        decision, _ = StepDecision.objects.update_or_create(
            assignment=assignment, step=step,
            defaults={"chosen_completion": chosen_completion, "human_completion": human},
        )
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
        return decision

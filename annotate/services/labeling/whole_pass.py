"""A whole untouched stepwise pass written in one insert and ended in the same transaction, without reading it back
(``annotate.services.whole_labeling`` calls it; anything else goes step by step through ``record_rating``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, F
from django.utils import timezone

from ...models import Assignment, Completion, FinishReason, Rating, StepDecision
from ...scales import campaign_scale
from ...workspace import StepContent, User
from ..suggestions import seen_when_rating, step_suggestions
from .finish import check_submittable, checked_finish, finish_pass
from .lock import locked_open_assignment
from .ratings import check_stop_at_first_error


@dataclass(frozen=True)
class PlainRating:
    """One step's rating in a whole pass sent at once (completion 0, no reason, no error category)."""

    rating: int
    flagged: bool = False
    time_ms: int | None = None


@dataclass(frozen=True)
class WrittenPass:
    """A whole pass ``record_untouched_pass`` wrote, as it stands in memory: the locked assignment (its
    ``step_total`` set), the ratings as ``ratings_of`` has them, the step decisions and the solution's steps. The
    finish and the API's answer read it instead of reading the rows back."""

    assignment: Assignment
    ratings: dict[tuple[int, int], Rating]
    decisions: list[StepDecision]
    steps: list[StepContent]


def record_untouched_pass(assignment_id: int, *, user: User, ratings: Sequence[PlainRating],
                          now: datetime | None = None) -> WrittenPass | None:
    """Write a whole stepwise pass in one insert: ``ratings`` are steps 0, 1, … in order. Done only when the
    pass is untouched and the ratings keep the page's rules as a whole (every value on the campaign's scale,
    nothing after its first error value, no more ratings than steps); None otherwise, and nothing is written:
    the caller goes step by step through ``record_rating``, which applies or refuses in the page's words. The
    lock and its refusals (not yours, lease gone, finished) are ``record_rating``'s own. Two reads: the locked
    assignment, then the solution's steps with whether the pass holds a rating yet."""
    now = now or timezone.now()
    assignment = locked_open_assignment(assignment_id, user=user, now=now)
    campaign = assignment.solution.campaign
    scale = campaign_scale(campaign)
    values = [rated.rating for rated in ratings]
    if (not ratings or not campaign.is_stepwise or any(value not in scale.allowed for value in values)
            or check_stop_at_first_error(values, scale=scale) is not None):
        return None
    steps, begun = _steps_and_begun(assignment)
    if begun or len(ratings) > len(steps):
        return None
    # Set as annotate() sets it on the lock's query (count_steps), which django-stubs does not follow.
    assignment.step_total = len(steps)  # type: ignore[attr-defined]
    shown = step_suggestions(campaign, assignment.solution, range(len(ratings)))
    written = Rating.objects.bulk_create([
        Rating(assignment=assignment, completion=step.completions[0], rating=rated.rating, flagged=rated.flagged,
               time_ms=rated.time_ms,
               suggestions_seen=seen_when_rating(campaign, has_labels=bool(shown.get(step.index)), rated_before=False))
        for step, rated in zip(steps, ratings, strict=False)])
    by_step: dict[tuple[int, int], Rating] = {}
    for index, rating in enumerate(written):
        # Set by annotate() in ratings_of, which django-stubs does not follow.
        rating.step_index, rating.completion_index = index, 0  # type: ignore[attr-defined]
        by_step[(index, 0)] = rating
    decisions = StepDecision.objects.bulk_create(
        [StepDecision(assignment=assignment, step_id=step.completions[0].step_id, chosen_completion=0)
         for step in steps[:len(ratings)]], ignore_conflicts=True)
    return WrittenPass(assignment, by_step, decisions, steps)


def _steps_and_begun(assignment: Assignment) -> tuple[list[StepContent], bool]:
    """The solution's steps with their completions (every step has its completion 0) and whether the pass holds
    a rating yet, in one query: the check is an uncorrelated subquery, and it reads under the lock."""
    completions = (Completion.objects.filter(step__solution_id=assignment.solution_id)
                   .annotate(step_index=F("step__index"),
                             begun=Exists(Rating.objects.filter(assignment_id=assignment.pk)))
                   .order_by("step__index", "index"))
    steps: list[StepContent] = []
    begun = False
    for completion in completions:
        begun = completion.begun
        if not steps or steps[-1].index != completion.step_index:
            steps.append(StepContent(completion.step_index, []))
        steps[-1].completions.append(completion)
    return steps, begun


def finish_written_pass(written: WrittenPass, *, reason: str | None, text: str = "",
                        total_time_ms: int | None = None, now: datetime | None = None) -> Assignment:
    """End a pass ``record_untouched_pass`` just wrote, in its transaction, under the rules of ``submit_assignment``
    (``reason`` None) or ``finish_assignment``, on the ratings in memory: no second lock, no read back."""
    now = now or timezone.now()
    assignment = written.assignment
    if reason is None:
        progress = check_submittable(assignment, reason=None, ratings=written.ratings)
        reason = FinishReason.FOUND_ERROR if progress.has_error else FinishReason.SOLUTION
        text = ""
    else:
        text = checked_finish(reason, text=text)
        if reason in (FinishReason.SOLUTION, FinishReason.FOUND_ERROR):
            check_submittable(assignment, reason=reason, ratings=written.ratings)
    finish_pass(assignment, reason=reason, text=text, now=now, total_time_ms=total_time_ms)
    return assignment

"""Ratings, one step at a time: the value on the campaign's scale, its reason and error category, and
stop-at-first-error (``record_rating``; ``check_stop_at_first_error`` for a finished pass given at once)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ...models import (
    RATIONALE_MAX_CHARS,
    Assignment,
    Campaign,
    Completion,
    Rating,
    RatingRevision,
    StepDecision,
    StepRationale,
)
from ...scales import PM1, Scale, campaign_scale
from ...workspace import User, Workspace, decisions_of, pass_progress, rated_steps, ratings_of, step_contents
from ..errors import LabelingError, RatingNotOnScale
from ..suggestions import seen_when_rating, step_suggestions
from .lock import locked_open_assignment


@dataclass(frozen=True)
class RatingResult:
    rating: Rating
    changed: bool
    workspace: Workspace  # the rows the write changed, as they stand after it; progress covers the whole pass
    removed: list[Rating] = field(default_factory=list)  # later steps' ratings this −1 took out of the pass

    @property
    def found_error(self) -> bool:
        """The pass now holds a −1: the later steps are locked and the pass waits to be submitted."""
        return self.workspace.progress.has_error

    @property
    def removed_notice(self) -> str:
        """What a −1 took out of the pass, in the words the page and the API both show."""
        # Set by annotate() in the query, which django-stubs does not follow.
        steps = sorted({r.step_index + 1 for r in self.removed if r.rating is not None or r.flagged})  # type: ignore[attr-defined]
        if not steps:
            return ""
        names = (f"Step {steps[0]} was" if len(steps) == 1 else
                 f"Steps {', '.join(map(str, steps[:-1]))} and {steps[-1]} were")
        # Set by annotate() in the query, which django-stubs does not follow.
        return (f"{names} rated after step {self.rating.step_index + 1}, which is now −1: "  # type: ignore[attr-defined]
                f"{'its rating was' if len(steps) == 1 else 'their ratings were'} removed from this pass "
                f"(kept in the revision history).")


def _clean_rationale(text: str) -> str:
    """A −1's reason as stored: one line, surrounding whitespace stripped, at most ``RATIONALE_MAX_CHARS``."""
    text = text.strip()
    if "\n" in text or "\r" in text:
        raise LabelingError("The reason must be one line: remove the line breaks.")
    if len(text) > RATIONALE_MAX_CHARS:
        raise LabelingError(f"The reason is too long: at most {RATIONALE_MAX_CHARS} characters, got {len(text)}.")
    return text


def _new_rationale(campaign: Campaign, scale: Scale, current: Rating | None, rating: int | None,
                   given: str | None) -> str:
    """The rationale a rating has after this write: ``given`` (None keeps the current one while the rating stays
    an error, −1 on PRM800K's scale); any other value has none, so changing a −1 clears its reason (kept in the
    revision)."""
    if given is not None:
        given = _clean_rationale(given)
        if given and campaign.step_rationale == StepRationale.OFF:
            raise LabelingError("This campaign takes no reasons on −1 steps.")
        if given and not scale.is_error(rating):
            raise LabelingError("A reason goes with a −1 rating only.")
    if not scale.is_error(rating):
        return ""
    if given is None:
        return current.rationale if current is not None and scale.is_error(current.rating) else ""
    return given


def _new_error_category(campaign: Campaign, scale: Scale, current: Rating | None, rating: int | None,
                        given: str | None) -> str:
    """The error category after this write: ``given`` (one of the campaign's; None keeps the current one while
    the rating stays an error); a rating that is no error has none."""
    if given:
        if given not in campaign.error_categories:
            raise LabelingError(f"“{given}” is not an error category of this campaign"
                                + (f" ({', '.join(campaign.error_categories)})." if campaign.error_categories
                                   else ": it has none."))
        if not scale.is_error(rating):
            raise LabelingError("An error category goes with an error rating only.")
    if not scale.is_error(rating):
        return ""
    if given is None:
        return current.error_category if current is not None and scale.is_error(current.rating) else ""
    return given


def record_rating(assignment_id: int, *, user: User, step_index: int, rating: int | None,
                  completion_index: int = 0, flagged: bool | None = None, time_ms: int | None = None,
                  rationale: str | None = None, error_category: str | None = None,
                  now: datetime | None = None) -> RatingResult:
    """Save one rating, one of the campaign's scale values (annotate/scales.py; PRM800K's −1/0/+1 by default).
    Idempotent: the same value twice is one rating; a change keeps a revision. ``error_category`` names one of
    the campaign's error categories on an error step (None keeps the current one).

    ``rationale`` is the labeler's one-line reason for a −1 (campaigns with ``step_rationale`` on); None keeps
    the reason a −1 already has, so pressing −1 again does not lose it.

    Stepwise mode keeps stop-at-first-error (an error is −1, or a value the scale calls an error): steps are
    rated in order (a null rating too), nothing after a −1 can be rated, and a −1 given to an earlier step
    takes the later steps' ratings out of the pass (their values stay in the revision history). A −1 does not
    end the pass: the labeler submits it (or changes the −1 and carries on). The pass's ratings are read once,
    under the assignment's lock, and serve the order check, the rating being changed and the returned
    workspace alike: this is the labelers' hottest request.
    """
    if time_ms is not None and time_ms < 0:
        raise LabelingError("time_ms must not be negative.")
    now = now or timezone.now()
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=now, count_steps=True)
        campaign = assignment.solution.campaign
        scale = campaign_scale(campaign)
        if rating is not None and rating not in scale.allowed:
            raise RatingNotOnScale(f"rating must be {', '.join(map(str, scale.ordinal[:-1]))} or {scale.ordinal[-1]}, "
                                f"not {rating}.")
        stepwise = campaign.is_stepwise
        ratings = ratings_of(assignment)
        decisions = {} if stepwise else decisions_of(assignment)
        current = ratings.get((step_index, completion_index))
        shown = [step_index, step_index + 1]
        if stepwise and (scale.is_error(rating) or (current is not None and scale.is_error(current.rating))):
            # The later rows lock (or open again): re-render them all.
            # Set by annotate() in the query, which django-stubs does not follow.
            shown = list(range(step_index, max(assignment.step_total, step_index + 1)))  # type: ignore[attr-defined]
        steps = step_contents(assignment, shown)
        completion = next((c for step in steps if step.index == step_index for c in step.completions
                           if c.index == completion_index), None)
        if completion is None:
            raise LabelingError(f"Step {step_index} has no completion {completion_index}.")
        if stepwise:
            _check_in_order(rated_steps(ratings), step_index, rating, scale.error_values)
        else:
            _check_decided_before(decisions, step_index)
        new_rationale = _new_rationale(campaign, scale, current, rating, rationale)
        new_category = _new_error_category(campaign, scale, current, rating, error_category)
        removed = _remove_after(assignment, ratings, step_index, user) if stepwise and scale.is_error(rating) else []
        new_flag = flagged if flagged is not None else (current.flagged if current else False)
        suggestions = step_suggestions(campaign, assignment.solution, shown)
        seen = seen_when_rating(campaign, has_labels=bool(suggestions.get(step_index)),
                                rated_before=current is not None and current.rating is not None)
        if current is None:
            current = Rating.objects.create(assignment=assignment, completion=completion, rating=rating,
                                            flagged=new_flag, time_ms=time_ms, rationale=new_rationale,
                                            error_category=new_category, suggestions_seen=seen)
            # Set by annotate() in the query, which django-stubs does not follow.
            current.step_index, current.completion_index = step_index, completion_index  # type: ignore[attr-defined]  # as ratings_of has them
            ratings[(step_index, completion_index)] = current
            changed = True
        else:
            changed = _revise(current, assignment=assignment, completion=completion, user=user, rating=rating,
                              flagged=new_flag, rationale=new_rationale, error_category=new_category, seen=seen,
                              time_ms=time_ms)
        current.assignment = assignment  # the locked, authorised instance, for the caller's response
        if stepwise:  # one INSERT … ON CONFLICT DO NOTHING, not get_or_create's four
            StepDecision.objects.bulk_create(
                [StepDecision(assignment=assignment, step_id=completion.step_id, chosen_completion=0)],
                ignore_conflicts=True)
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
    # Set by annotate() in the query, which django-stubs does not follow.
    progress = pass_progress(assignment.step_total, stepwise, ratings, decisions,  # type: ignore[attr-defined]
                         scale.error_values)
    return RatingResult(current, changed, Workspace(assignment, steps, ratings, decisions, progress, suggestions),
                        removed)


def _revise(current: Rating, *, assignment: Assignment, completion: Completion, user: User, rating: int | None,
            flagged: bool | None, rationale: str, error_category: str, seen: str, time_ms: int | None) -> bool:
    """Give ``current`` its new values, keeping the previous ones as a revision; False when none of them changes."""
    if (current.rating == rating and current.flagged == flagged and current.rationale == rationale
            and current.error_category == error_category):
        return False
    RatingRevision.objects.create(rating=current, assignment=assignment, completion=completion,
                                  previous_rating=current.rating, previous_flagged=current.flagged,
                                  previous_rationale=current.rationale, changed_by_id=user.pk)
    current.rating, current.flagged, current.rationale = rating, flagged, rationale
    current.error_category, current.suggestions_seen = error_category, seen
    if time_ms is not None:
        current.time_ms = time_ms
    current.save(update_fields=["rating", "flagged", "rationale", "error_category", "time_ms",
                                "suggestions_seen", "updated_at"])
    return True


def _remove_after(assignment: Assignment, ratings: dict[tuple[int, int], Rating], step_index: int,
                  user: User) -> list[Rating]:
    """Take every rating after ``step_index`` out of the pass, keeping its last value as a revision.

    Deleting (not nulling) them keeps the exported pass exactly what the labeler now stands by; the
    revisions keep their assignment and completion, so the history still says what was rated.
    """
    later = sorted((r for (index, _), r in ratings.items() if index > step_index),
                   # Set by annotate() in the query, which django-stubs does not follow.
                   key=lambda r: (r.step_index, r.completion_index))  # type: ignore[attr-defined]
    if not later:
        return []
    RatingRevision.objects.bulk_create([
        RatingRevision(rating=r, assignment=assignment, completion_id=r.completion_id, previous_rating=r.rating,
                       previous_flagged=r.flagged, previous_rationale=r.rationale, removed_from_pass=True,
                       changed_by_id=user.pk)
        for r in later])
    Rating.objects.filter(pk__in=[r.pk for r in later]).delete()
    StepDecision.objects.filter(assignment=assignment, step__index__gt=step_index).delete()
    for r in later:
        # Set by annotate() in the query, which django-stubs does not follow.
        del ratings[(r.step_index, r.completion_index)]  # type: ignore[attr-defined]
    return later


def _check_in_order(rated: dict[int, int], step_index: int, rating: int | None,
                    errors: frozenset[int] = PM1.error_values) -> None:
    """Stepwise: no gap before a rated step and nothing after the first error (a null rating included)."""
    earlier = {step: value for step, value in rated.items() if step < step_index}
    error = next((step for step in sorted(earlier) if earlier[step] in errors), None)
    if error is not None:
        raise LabelingError(f"Step {error + 1} is rated −1: nothing after the first error can be rated. Change "
                            f"that rating first if it was a mistake.")
    if len(earlier) < step_index:
        missing = min(set(range(step_index)) - set(earlier))
        raise LabelingError(f"Rate step {missing + 1} first: steps are rated in order.")
    later = [step for step in rated if step > step_index]
    if rating is None and later:
        raise LabelingError(f"Step {max(later) + 1} is rated: a rating can only be cleared from the last rated "
                            f"step, so that no rated step follows an unrated one.")


def check_stop_at_first_error(values: Sequence[int | None], *, scale: Scale = PM1) -> tuple[int, str] | None:
    """A finished stepwise pass, as its steps' ratings in order (None: not rated): the first step that
    breaks stop-at-first-error (an error value of ``scale``, PRM800K's −1 by default) and why, or None. Imports
    of finished passes and whole-solution labelings use it; the workspace keeps the same rule one rating at a
    time in ``record_rating``."""
    error: int | None = None
    gap: int | None = None
    for index, value in enumerate(values):
        if value is None:
            gap = index if gap is None else gap
        elif error is not None:
            word = "−1" if scale.is_pm1 else scale.word(values[error])
            return index, f"is rated after step {error + 1}'s {word}: nothing after the first error can be rated"
        elif gap is not None:
            return index, f"is rated while step {gap + 1} is not: steps are rated in order"
        elif scale.is_error(value):
            error = index
    return None


def _check_decided_before(decisions: dict[int, StepDecision], step_index: int) -> None:
    """Conversational mode: a step's candidates are rated only once every earlier step has a continuation."""
    decided = sum(1 for index, decision in decisions.items() if index < step_index and decision.is_decided)
    if decided < step_index:
        raise LabelingError(f"Choose or write a continuation for step {decided + 1} first.")

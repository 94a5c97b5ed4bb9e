"""Labeling rules, written: ratings, marks, bad-split reports, continuations and the end of a pass.

Every write locks the labeler's open assignment (``locked_open_assignment``) and answers in the page's words;
the workspace read is ``annotate.workspace``, handing work out is ``annotate.services.leases``.

Why one module of ~550 lines: every write here takes the same lock and keeps the same stop-at-first-error rule
(``record_rating``, ``record_untouched_pass``, ``flag_step``, the finish checks); split, the rule would be split.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from stepcore.graders import graded_by_people
from steplab import events

from .. import permissions
from ..models import (
    RATIONALE_MAX_CHARS,
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    FinishReason,
    Rating,
    RatingRevision,
    Solution,
    SplitReport,
    Step,
    StepDecision,
    StepRationale,
)
from ..scales import PM1, Scale, campaign_scale
from ..workspace import (
    Progress,
    StepContent,
    User,
    Workspace,
    continuations,
    decisions_of,
    pass_progress,
    rated_steps,
    ratings_of,
    step_contents,
)
from .errors import LabelingError, LeaseExpired, NotAllowed, RatingNotOnScale
from .suggestions import seen_when_rating, step_suggestions


def locked_open_assignment(assignment_id: int, user: User, now: datetime, *,
                            count_steps: bool = False) -> Assignment:
    """Lock the labeler's open assignment and check its membership in one query (the writes' hot path).

    ``count_steps`` also counts the solution's steps into ``assignment.step_total``, for callers that
    answer with the pass's progress.
    """
    queryset = (Assignment.objects.select_for_update(of=("self",)).select_related("solution__campaign")
                .annotate(labeler_may_label=permissions.labeler_may_label()))
    if count_steps:
        queryset = queryset.annotate(step_total=Coalesce(Subquery(
            Step.objects.filter(solution_id=OuterRef("solution_id")).order_by().values("solution_id")
            .annotate(n=Count("pk")).values("n")), 0))
    assignment = next(iter(queryset.filter(pk=assignment_id)), None)  # by primary key: no .first() ORDER BY
    permissions.require(permissions.owns_assignment, user, assignment, "This is not your assignment.", error=NotAllowed)
    assert assignment is not None  # owns_assignment refuses None
    if assignment.status == AssignmentStatus.EXPIRED:
        raise LeaseExpired(
            "Your lease on this solution expired and it went back to the pool. The ratings you gave before "
            "it expired are saved; start labeling again to continue."
        )
    if assignment.status != AssignmentStatus.LEASED:
        raise LabelingError("This solution is already finished; ratings can no longer change.")
    # A labeler removed from the campaign mid-lease can no longer write to it.
    permissions.require(permissions.labels_on, user, assignment,
                        "You are not an active labeler in this campaign any more.", error=NotAllowed)
    # A clock-expired lease that the reaper has not taken yet is still the labeler's: keep it and renew.
    assignment.lease_expires_at = now + timedelta(minutes=assignment.solution.campaign.lease_minutes)
    return assignment


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


def record_rating(assignment_id: int, user: User, *, step_index: int, rating: int | None,
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
        assignment = locked_open_assignment(assignment_id, user, now, count_steps=True)
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
        elif (current.rating != rating or current.flagged != new_flag or current.rationale != new_rationale
              or current.error_category != new_category):
            RatingRevision.objects.create(rating=current, assignment=assignment, completion=completion,
                                          previous_rating=current.rating, previous_flagged=current.flagged,
                                          previous_rationale=current.rationale, changed_by_id=user.pk)
            current.rating, current.flagged, current.rationale = rating, new_flag, new_rationale
            current.error_category, current.suggestions_seen = new_category, seen
            if time_ms is not None:
                current.time_ms = time_ms
            current.save(update_fields=["rating", "flagged", "rationale", "error_category", "time_ms",
                                        "suggestions_seen", "updated_at"])
            changed = True
        else:
            changed = False
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


def check_stop_at_first_error(values: Sequence[int | None], scale: Scale = PM1) -> tuple[int, str] | None:
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


def record_untouched_pass(assignment_id: int, user: User, *, ratings: Sequence[PlainRating],
                          now: datetime | None = None) -> WrittenPass | None:
    """Write a whole stepwise pass in one insert: ``ratings`` are steps 0, 1, … in order. Done only when the
    pass is untouched and the ratings keep the page's rules as a whole (every value on the campaign's scale,
    nothing after its first error value, no more ratings than steps); None otherwise, and nothing is written:
    the caller goes step by step through ``record_rating``, which applies or refuses in the page's words. The
    lock and its refusals (not yours, lease gone, finished) are ``record_rating``'s own. Two reads: the locked
    assignment, then the solution's steps with whether the pass holds a rating yet."""
    now = now or timezone.now()
    assignment = locked_open_assignment(assignment_id, user, now)
    campaign = assignment.solution.campaign
    scale = campaign_scale(campaign)
    values = [rated.rating for rated in ratings]
    if (not ratings or not campaign.is_stepwise or any(value not in scale.allowed for value in values)
            or check_stop_at_first_error(values, scale) is not None):
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
        progress = _check_submittable(assignment, None, written.ratings)
        reason = FinishReason.FOUND_ERROR if progress.has_error else FinishReason.SOLUTION
        text = ""
    else:
        text = _checked_finish(reason, text)
        if reason in (FinishReason.SOLUTION, FinishReason.FOUND_ERROR):
            _check_submittable(assignment, reason, written.ratings)
    _finish(assignment, reason, text, now, total_time_ms)
    return assignment


def _check_decided_before(decisions: dict[int, StepDecision], step_index: int) -> None:
    """Conversational mode: a step's candidates are rated only once every earlier step has a continuation."""
    decided = sum(1 for index, decision in decisions.items() if index < step_index and decision.is_decided)
    if decided < step_index:
        raise LabelingError(f"Choose or write a continuation for step {decided + 1} first.")


def flag_step(assignment_id: int, user: User, *, step_index: int, flagged: bool,
              completion_index: int = 0) -> Rating:
    """Set or clear the "Unsure" mark (PRM800K's ``flagged``); a step can be marked before it is rated, but
    not after a −1 (stepwise: those steps are out of the pass)."""
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, timezone.now())
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


def report_bad_split(*, assignment_id: int, user: User, step_index: int, reported: bool = True,
                     note: str = "") -> Assignment:
    """Flag (or unflag) a step of the labeler's open pass as a bad split, with an optional one-line note. The
    flag is about the step boundaries, not the rating, so any step of the pass can carry it."""
    note = note.strip()
    if "\n" in note or "\r" in note or len(note) > RATIONALE_MAX_CHARS:
        raise LabelingError(f"The bad-split note must be one line of at most {RATIONALE_MAX_CHARS} characters.")
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, timezone.now())
        step = Step.objects.filter(solution_id=assignment.solution_id, index=step_index).first()
        if step is None:
            raise LabelingError(f"There is no step {step_index}.")
        if reported:
            SplitReport.objects.update_or_create(assignment=assignment, step=step, defaults={"note": note})
        else:
            SplitReport.objects.filter(assignment=assignment, step=step).delete()
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
    return assignment


def decide_step(assignment_id: int, user: User, *, step_index: int, chosen_completion: int | None = None,
                human_text: str | None = None) -> StepDecision:
    """Conversational mode: continue with a rated completion, or write one's own step."""
    if (chosen_completion is None) == (human_text is None or not human_text.strip()):
        raise LabelingError("Choose one completion or write your own step (exactly one of the two).")
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, timezone.now())
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


def _finish(assignment: Assignment, reason: str, text: str, now: datetime, total_time_ms: int | None = None) -> None:
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
        from .quality import after_gold_assignment

        transaction.on_commit(lambda: after_gold_assignment(assignment.pk))


def finish_assignment(assignment_id: int, user: User, *, reason: str, text: str = "",
                      total_time_ms: int | None = None, now: datetime | None = None) -> Assignment:
    """End a labeler's pass: ``solution`` needs every step rated and no −1, ``found_error`` a −1 (stepwise,
    nothing rated after it by construction); bad problem/give up need a reason."""
    now = now or timezone.now()
    text = _checked_finish(reason, text)
    judged = reason in (FinishReason.SOLUTION, FinishReason.FOUND_ERROR)
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, now, count_steps=judged)
        if judged:
            _check_submittable(assignment, reason)
        _finish(assignment, reason, text, now, total_time_ms)
    return assignment


def _checked_finish(reason: str, text: str) -> str:
    """A finish reason's text as stored; refuses an unknown reason, and bad problem / give up without a text."""
    if reason not in FinishReason.values:
        raise LabelingError(f"Unknown finish reason {reason!r}.")
    text = (text or "").strip()
    if reason in (FinishReason.BAD_PROBLEM, FinishReason.GIVE_UP) and not text:
        raise LabelingError("Say why: a reason is required for “bad problem” and “give up”.")
    return text


def submit_assignment(assignment_id: int, user: User, *, total_time_ms: int | None = None,
                      now: datetime | None = None) -> Assignment:
    """The workspace's "Submit" control: a pass holding a −1 ends as ``found_error``, a complete one as
    ``solution``. Until this runs, a −1 can still be changed."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, now, count_steps=True)
        progress = _check_submittable(assignment, None)
        reason = FinishReason.FOUND_ERROR if progress.has_error else FinishReason.SOLUTION
        _finish(assignment, reason, "", now, total_time_ms)
    return assignment


def _check_submittable(assignment: Assignment, reason: str | None,
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


def record_outcome(assignment_id: int, user: User, *, correct: bool | None,
                   now: datetime | None = None) -> Assignment:
    """The labeler's rating of the solution's final answer (campaigns graded by people; None clears it). When
    the pass is submitted it becomes the solution's outcome label."""
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user, now or timezone.now())
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

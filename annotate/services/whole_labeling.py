"""A whole solution's labels in one request: for programs (an LLM judge, a migration script, an external tool).

The pass ends through ``labeling.finish_assignment`` / ``submit_assignment``, and the ratings go in under the
page's rules (steps in order, nothing after the first −1, the lease, membership, reasons), all in one
transaction, so a refused step leaves the pass as it was. A client key makes a retry safe: the same key answers
the labeling the first request made and applies nothing again.

The common case for a program (an untouched stepwise pass, steps 0, 1, … in order, every one rated, nothing
after the first error, no reasons or categories) is written at once by ``labeling.record_untouched_pass`` and
ended by ``labeling.finish_written_pass``: one lock, one read of the steps, one insert of the ratings, one update
of the assignment, and the answer is built from what is in memory.
Anything else (a pass the labeler began on the page, a gap, a rating after a −1, a reason) goes step by step
through ``labeling.record_rating``, which applies it or refuses it with the page's own words.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from .. import permissions
from ..models import Assignment, LabelingKey
from ..workspace import User
from . import labeling
from .errors import LabelingError, LeaseExpired, NotAllowed


@dataclass(frozen=True)
class StepLabel:
    """One step's label as the caller sends it (completion 0: the step text)."""

    step_index: int
    rating: int | None
    rationale: str | None = None
    flagged: bool | None = None
    time_ms: int | None = None
    error_category: str | None = None


@dataclass(frozen=True)
class LabelingInput:
    """One whole labeling: the steps' labels, how the pass ends (None: as its ratings say), and its client key."""

    assignment_id: int
    client_key: str
    ratings: Sequence[StepLabel]
    finish_reason: str | None = None
    finish_text: str = ""
    total_time_ms: int | None = None


class LabelingRefused(LabelingError):
    """A refusal that names the input at fault (``field``: ``ratings[2].rating``, ``finish_reason``, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class LabelingOutcome:
    assignment: Assignment
    replayed: bool  # the client key was seen before: nothing was applied this time
    written: labeling.WrittenPass | None = None  # the pass as written at once, for an answer without a read back


def _claim_key(labeling_input: LabelingInput, user: User) -> LabelingKey | None:
    """Record the client key, or return the row of the request that already used it. A concurrent request with
    the same key waits on the unique index until the first one commits, then finds its row.

    One ``INSERT … ON CONFLICT DO NOTHING RETURNING``: the ORM's insert says whether it inserted only by raising,
    which inside the labeling's transaction needs a savepoint around it, two more round trips on every request
    for the rare retry. PostgreSQL and SQLite both speak it."""
    permissions.require(permissions.is_signed_in, user, None, "Log in to label.", error=NotAllowed)
    owner = user.pk
    assert owner is not None  # is_signed_in refuses the anonymous user
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {connection.ops.quote_name(LabelingKey._meta.db_table)} "
            "(user_id, client_key, assignment_id, created_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (user_id, client_key) DO NOTHING RETURNING id",
            [owner, labeling_input.client_key, labeling_input.assignment_id,
             connection.ops.adapt_datetimefield_value(timezone.now())])
        if cursor.fetchone() is not None:
            return None
    return LabelingKey.objects.get(user_id=owner, client_key=labeling_input.client_key)


def _rate_untouched_pass(labeling_input: LabelingInput, user: User, now: datetime) -> labeling.WrittenPass | None:
    """The common case in one insert (``labeling.record_untouched_pass``); None: the caller goes step by step.
    Reasons and categories always go step by step: ``record_rating`` checks them."""
    labels = labeling_input.ratings
    if (not labels or any(label.step_index != position or label.rating is None or label.rationale
                          or label.error_category for position, label in enumerate(labels))):
        return None
    return labeling.record_untouched_pass(
        labeling_input.assignment_id, user=user, now=now,
        ratings=[labeling.PlainRating(rating=label.rating, flagged=bool(label.flagged), time_ms=label.time_ms)
                 for label in labels if label.rating is not None])


def _rate_step_by_step(labeling_input: LabelingInput, user: User, now: datetime) -> None:
    """Each rating through the page's rating service, in the order given; a refusal names the rating."""
    for position, label in enumerate(labeling_input.ratings):
        try:
            labeling.record_rating(
                labeling_input.assignment_id, user=user, step_index=label.step_index, rating=label.rating,
                flagged=label.flagged, time_ms=label.time_ms, rationale=label.rationale,
                error_category=label.error_category, now=now)
        except (NotAllowed, LeaseExpired):
            raise
        except LabelingError as error:
            raise LabelingRefused(f"ratings[{position}]", f"Step {label.step_index + 1}: {error}") from None


def apply_labeling(labeling_input: LabelingInput, user: User, *,
                   now: datetime | None = None) -> LabelingOutcome:
    """Rate the steps in the order given, then finish the pass, all or nothing. Refusals raise
    ``NotAllowed`` (not yours), ``LeaseExpired`` (gone back to the pool) or ``LabelingRefused``
    naming the step or field."""
    now = now or timezone.now()
    with transaction.atomic():
        earlier = _claim_key(labeling_input, user)
        if earlier is not None:
            if earlier.assignment_id != labeling_input.assignment_id:
                raise LabelingRefused("client_key", f"This client key was already used for assignment "
                                      f"{earlier.assignment_id}; use a new key for each labeling.")
            return LabelingOutcome(Assignment.objects.get(pk=earlier.assignment_id), replayed=True)
        written = _rate_untouched_pass(labeling_input, user, now)
        if written is None:
            _rate_step_by_step(labeling_input, user, now)
        try:
            if written is not None:
                assignment = labeling.finish_written_pass(
                    written, reason=labeling_input.finish_reason, text=labeling_input.finish_text,
                    total_time_ms=labeling_input.total_time_ms, now=now)
            elif labeling_input.finish_reason is None:
                assignment = labeling.submit_assignment(labeling_input.assignment_id, user=user,
                                                        total_time_ms=labeling_input.total_time_ms, now=now)
            else:
                assignment = labeling.finish_assignment(
                    labeling_input.assignment_id, user=user, reason=labeling_input.finish_reason,
                    text=labeling_input.finish_text, total_time_ms=labeling_input.total_time_ms, now=now)
        except (NotAllowed, LeaseExpired):
            raise
        except LabelingError as error:
            raise LabelingRefused("finish_reason", str(error)) from None
    return LabelingOutcome(assignment, replayed=False, written=written)


def apply_labelings(inputs: Sequence[LabelingInput], user: User, *,
                    now: datetime | None = None) -> list[LabelingOutcome | LabelingError]:
    """Several labelings, each all or nothing on its own: a refused one holds back none of the others, and its
    refusal takes its place in the answer."""
    outcomes: list[LabelingOutcome | LabelingError] = []
    for labeling_input in inputs:
        try:
            outcomes.append(apply_labeling(labeling_input, user, now=now))
        except LabelingError as error:
            outcomes.append(error)
    return outcomes

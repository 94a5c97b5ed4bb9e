"""A whole solution's labels in one request: for programs (an LLM judge, a migration script, an external tool).

The step ratings go through ``labeling.record_rating`` one by one, in the order given, and the pass ends through
``labeling.finish_assignment`` / ``submit_assignment``: the page's rules (steps in order, nothing after the first
−1, the lease, membership, overlap, reasons) hold here because they are the same code. All of it runs in one
transaction, so a refused step leaves the pass as it was. A client key makes a retry safe: the same key answers
the labeling the first request made and applies nothing again.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..models import Assignment, Campaign, LabelingKey
from . import labeling


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


class LabelingRefused(labeling.LabelingError):
    """A refusal that names the input at fault (``field``: ``ratings[2].rating``, ``finish_reason``, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class LabelingOutcome:
    assignment: Assignment
    replayed: bool  # the client key was seen before: nothing was applied this time


def _check_error_category(campaign: Campaign, position: int, label: StepLabel) -> None:
    """A category must be one the campaign defines, when it defines any (free text otherwise)."""
    categories = getattr(campaign, "error_categories", None) or []
    if label.error_category is not None and categories and label.error_category not in categories:
        raise LabelingRefused(f"ratings[{position}].error_category",
                              f"Step {label.step_index + 1}: unknown error category {label.error_category!r}; this "
                              f"campaign's categories are {', '.join(map(str, categories))}.")


def _claim_key(labeling_input: LabelingInput, user: labeling.User) -> LabelingKey | None:
    """Record the client key, or return the row of the request that already used it. A concurrent request with
    the same key waits on the unique index until the first one commits, then finds its row."""
    try:
        with transaction.atomic():
            LabelingKey.objects.create(user_id=user.pk, client_key=labeling_input.client_key,
                                       assignment_id=labeling_input.assignment_id)
    except IntegrityError:
        return LabelingKey.objects.get(user_id=user.pk, client_key=labeling_input.client_key)
    return None


def apply_labeling(labeling_input: LabelingInput, user: labeling.User, *,
                   now: datetime | None = None) -> LabelingOutcome:
    """Rate the steps in the order given, then finish the pass, all or nothing. Refusals raise
    ``labeling.NotAllowed`` (not yours), ``labeling.LeaseExpired`` (gone back to the pool) or ``LabelingRefused``
    naming the step or field."""
    now = now or timezone.now()
    with transaction.atomic():
        earlier = _claim_key(labeling_input, user)
        if earlier is not None:
            if earlier.assignment_id != labeling_input.assignment_id:
                raise LabelingRefused("client_key", f"This client key was already used for assignment "
                                      f"{earlier.assignment_id}; use a new key for each labeling.")
            return LabelingOutcome(Assignment.objects.get(pk=earlier.assignment_id), replayed=True)
        campaign: Campaign | None = None
        for position, label in enumerate(labeling_input.ratings):
            try:
                result = labeling.record_rating(
                    labeling_input.assignment_id, user, step_index=label.step_index, rating=label.rating,
                    flagged=label.flagged, time_ms=label.time_ms, rationale=label.rationale, now=now)
            except (labeling.NotAllowed, labeling.LeaseExpired):
                raise
            except labeling.LabelingError as error:
                raise LabelingRefused(f"ratings[{position}]", f"Step {label.step_index + 1}: {error}") from None
            campaign = campaign or result.workspace.assignment.solution.campaign
            _check_error_category(campaign, position, label)
        try:
            if labeling_input.finish_reason is None:
                assignment = labeling.submit_assignment(labeling_input.assignment_id, user,
                                                        total_time_ms=labeling_input.total_time_ms, now=now)
            else:
                assignment = labeling.finish_assignment(
                    labeling_input.assignment_id, user, reason=labeling_input.finish_reason,
                    text=labeling_input.finish_text, total_time_ms=labeling_input.total_time_ms, now=now)
        except (labeling.NotAllowed, labeling.LeaseExpired):
            raise
        except labeling.LabelingError as error:
            raise LabelingRefused("finish_reason", str(error)) from None
    return LabelingOutcome(assignment, replayed=False)


def apply_labelings(inputs: Sequence[LabelingInput], user: labeling.User, *,
                    now: datetime | None = None) -> list[LabelingOutcome | labeling.LabelingError]:
    """Several labelings, each all or nothing on its own: a refused one holds back none of the others, and its
    refusal takes its place in the answer."""
    outcomes: list[LabelingOutcome | labeling.LabelingError] = []
    for labeling_input in inputs:
        try:
            outcomes.append(apply_labeling(labeling_input, user, now=now))
        except labeling.LabelingError as error:
            outcomes.append(error)
    return outcomes

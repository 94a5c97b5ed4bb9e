"""The one lock every labeling write takes: the labeler's open assignment, with its membership checked in the same
query, and the refusals in the page's words."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from ... import permissions
from ...models import Assignment, AssignmentStatus, Step
from ...workspace import User
from ..errors import LabelingError, LeaseExpired, NotAllowed


def locked_open_assignment(assignment_id: int, *, user: User, now: datetime,
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

"""Work distribution: leasing, renewing, reaping and resuming labelers' passes.

Leases: a solution is handed to at most ``campaign.overlap`` distinct labelers, never twice to the same
labeler, claimed with ``SELECT … FOR UPDATE SKIP LOCKED`` so concurrent requests never over-assign.
``Solution.label_count`` counts open and finished assignments; the reaper gives expired slots back.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone

from .. import permissions
from ..models import (
    RESPLIT_INTO,
    Assignment,
    AssignmentStatus,
    Campaign,
    LeaseOrder,
    Membership,
    Role,
    Solution,
)
from ..workspace import User
from .errors import LabelingError, LeaseExpired, NotAllowed
from .labeling import locked_open_assignment, submit_assignment


@dataclass(frozen=True)
class LeaseOutcome:
    assignment: Assignment | None
    reason: str = ""
    #: the labeler's last lease, when it ran out before they submitted it and this is the first lease since: the
    #: page they land on says what became of it
    lapsed: Assignment | None = None

    @property
    def lapsed_words(self) -> str:
        if self.lapsed is None:
            return ""
        rated = self.lapsed.ratings.count()
        when = timezone.localtime(self.lapsed.lease_expires_at).strftime("%H:%M") if self.lapsed.lease_expires_at \
            else "its end"
        kept = (f" The {rated} rating{'s' if rated != 1 else ''} you gave are kept with it but count only once a "
                "pass on it is submitted." if rated else "")
        return (f"Your lease on your previous solution ran out at {when} before you submitted it, so it went back "
                f"to the queue for the next labeler.{kept} This is a new solution.")


def labeler_membership(campaign: Campaign, user: User, *, lock: bool = False) -> Membership:
    """The membership the user labels under, locked when asked (a labeler's leases queue up on it); the rule is
    ``permissions.labels_under`` on the membership in hand, so the check costs no second query."""
    permissions.require(permissions.is_signed_in, user, campaign, "Log in to label.", error=NotAllowed)
    membership = permissions.membership_of(user, campaign, lock=lock)
    permissions.require(permissions.labels_under, user, membership, "You are not a labeler in this campaign.",
                        error=NotAllowed)
    assert membership is not None  # labels_under refuses None
    return membership


def _lapsed_lease(campaign: Campaign, user: User) -> Assignment | None:
    """The labeler's newest assignment here when its lease ran out unsubmitted (nothing leased since)."""
    newest = Assignment.objects.filter(solution__campaign=campaign, labeler=user).order_by("-pk").first()  # type: ignore[misc]
    return newest if newest is not None and newest.status == AssignmentStatus.EXPIRED else None


def _open_assignment(campaign: Campaign, user: User) -> Assignment | None:
    return (
        # Only a signed-in labeler gets here (login_required, the API's authentication), never AnonymousUser.
        Assignment.objects.filter(solution__campaign=campaign, labeler=user, status=AssignmentStatus.LEASED)  # type: ignore[misc]
        .select_related("solution__campaign")
        .order_by("pk")
        .first()
    )


def _seen_by(user: User) -> Q:
    """Solutions the labeler already had, as ``NOT IN (their assignments)``: PostgreSQL hashes the labeler's
    few solution ids once (via the labeler index). The ``NOT EXISTS`` form planned as a merge anti-join over the
    whole assignment table in solution order: 31 ms per lease at 100k assignments, against 0.4 ms."""
    # Only a signed-in labeler gets here (login_required, the API's authentication), never AnonymousUser.
    return Q(pk__in=Assignment.objects.filter(labeler=user).values("solution_id"))  # type: ignore[misc]


def _claim(candidates: models.QuerySet[Solution], campaign: Campaign, user: User,
           now: datetime) -> Assignment | None:
    """Lock one candidate row (skipping rows other transactions hold), then assign it."""
    open_candidates = candidates.filter(label_count__lt=campaign.overlap).exclude(_seen_by(user))
    if campaign.lease_order == LeaseOrder.DISAGREEMENT_FIRST:
        # consensus routing: human time goes first where the machine sources disagree; unlabeled ones last
        open_candidates = open_candidates.order_by(F("machine_disagreement").desc(nulls_last=True), "pk")
    else:
        open_candidates = open_candidates.order_by("pk")
    solution = open_candidates.select_for_update(skip_locked=True, of=("self",)).first()
    if solution is None:
        # Every open row may merely be locked by concurrent leases: wait for one rather than report "no work".
        # PostgreSQL re-checks label_count on the locked row and moves on to the next one when it is full.
        solution = open_candidates.select_for_update(of=("self",)).first()
    if solution is None:
        return None
    return _assign(solution, campaign, user, now)


def _assign(solution: Solution, campaign: Campaign, user: User, now: datetime) -> Assignment:
    """Lease a claimed solution to the labeler; its label count includes open leases, so overlap holds."""
    Solution.objects.filter(pk=solution.pk).update(label_count=F("label_count") + 1)
    # Only a signed-in labeler gets here (login_required, the API's authentication), never AnonymousUser.
    return Assignment.objects.create(  # type: ignore[misc]
        solution=solution, labeler=user, status=AssignmentStatus.LEASED, leased_at=now, started_at=now,
        lease_expires_at=now + timedelta(minutes=campaign.lease_minutes),
    )


def _screening_pending(campaign: Campaign, membership: Membership) -> bool:
    return membership.role == Role.LABELER and membership.passed_screening is None and campaign.solutions.filter(
        is_screening=True).exists()


def lease_next_solution(campaign: Campaign, user: User, *, now: datetime | None = None,
                        rng: random.Random | None = None) -> LeaseOutcome:
    """The labeler's open lease (renewed), else a new one: screening first, QC at the campaign's rate."""
    now = now or timezone.now()
    if not campaign.is_active:
        return LeaseOutcome(None, "This campaign is archived.")
    with transaction.atomic():
        membership = labeler_membership(campaign, user, lock=True)
        current = _open_assignment(campaign, user)
        if current is not None:
            renew_lease(current, now=now)
            return LeaseOutcome(current)
        if membership.is_paused:
            return LeaseOutcome(None, "Your labeling is paused by the campaign admins.")
        lapsed = _lapsed_lease(campaign, user)
        # A solution re-split after it was labeled keeps its labels but takes no new work: its successor does.
        solutions = Solution.objects.filter(campaign=campaign).exclude(provenance__has_key=RESPLIT_INTO)
        if _screening_pending(campaign, membership):
            assignment = _claim_screening(solutions, campaign, user, now)
            if assignment is not None:
                return LeaseOutcome(assignment, lapsed=lapsed)
            from .quality import decide_screening  # the screening set is done: grade it now

            if not decide_screening(membership):
                return LeaseOutcome(None, "You did not pass this campaign's screening set.")
        elif membership.passed_screening is False:
            return LeaseOutcome(None, "You did not pass this campaign's screening set.")
        rng = rng or random.Random()
        if campaign.qc_rate > 0 and rng.random() < campaign.qc_rate:
            assignment = _claim_qc(solutions, campaign, user, now)
            if assignment is not None:
                return LeaseOutcome(assignment, lapsed=lapsed)
        regular = solutions.filter(is_quality_control=False, is_screening=False)
        assignment = _claim(regular, campaign, user, now)
        if assignment is None:
            return LeaseOutcome(None, "No work left in this campaign for you. Thank you!")
        return LeaseOutcome(assignment, lapsed=lapsed)


def _claim_gold(candidates: models.QuerySet[Solution], user: User, now: datetime,
                campaign: Campaign) -> Assignment | None:
    """QC and screening solutions go to every labeler (no overlap cap), each once."""
    solution = candidates.exclude(_seen_by(user)).order_by("pk").first()
    if solution is None:
        return None
    return _assign(solution, campaign, user, now)


def _claim_screening(solutions: models.QuerySet[Solution], campaign: Campaign, user: User,
                     now: datetime) -> Assignment | None:
    return _claim_gold(solutions.filter(is_screening=True), user, now, campaign)


def _claim_qc(solutions: models.QuerySet[Solution], campaign: Campaign, user: User,
              now: datetime) -> Assignment | None:
    return _claim_gold(solutions.filter(is_quality_control=True), user, now, campaign)


def renew_lease(assignment: Assignment, *, now: datetime | None = None) -> datetime:
    """Heartbeat: push the lease's expiry out by the campaign's lease length."""
    now = now or timezone.now()
    expires = now + timedelta(minutes=assignment.solution.campaign.lease_minutes)
    Assignment.objects.filter(pk=assignment.pk, status=AssignmentStatus.LEASED).update(lease_expires_at=expires)
    assignment.lease_expires_at = expires
    return expires


def reap_expired_leases(*, now: datetime | None = None) -> int:
    """Expire leases past their time and give their slots back. Ratings already given are kept."""
    now = now or timezone.now()
    reaped = 0
    with transaction.atomic():
        expired = list(
            Assignment.objects.select_for_update(skip_locked=True)
            .filter(status=AssignmentStatus.LEASED, lease_expires_at__lt=now)
            .values_list("pk", "solution_id")
        )
        if expired:
            Assignment.objects.filter(pk__in=[pk for pk, _ in expired]).update(status=AssignmentStatus.EXPIRED)
            for _, solution_id in expired:
                Solution.objects.filter(pk=solution_id, label_count__gt=0).update(label_count=F("label_count") - 1)
            reaped = len(expired)
    return reaped


def heartbeat(assignment_id: int, user: User, *, now: datetime | None = None) -> datetime:
    """The open workspace's keep-alive: renew the labeler's own open lease, or say clearly that it is gone."""
    now = now or timezone.now()
    with transaction.atomic():
        assignment = locked_open_assignment(assignment_id, user=user, now=now)
        assignment.save(update_fields=["lease_expires_at", "updated_at"])
    assert assignment.lease_expires_at is not None
    return assignment.lease_expires_at


def resume_expired_lease(assignment_id: int, user: User, *, now: datetime | None = None) -> Assignment:
    """Take an expired lease back, ratings and all, while its solution still has a free slot.

    Without this, ratings given before a lease was reaped would stay behind on a pass nobody can finish.
    """
    now = now or timezone.now()
    with transaction.atomic():
        assignment = (Assignment.objects.select_for_update(of=("self",)).select_related("solution__campaign")
                      .filter(pk=assignment_id).first())
        permissions.require(permissions.owns_assignment, user, assignment, "This is not your assignment.",
                            error=NotAllowed)
        assert assignment is not None  # owns_assignment refuses None
        if assignment.status == AssignmentStatus.LEASED:
            return assignment
        if assignment.status != AssignmentStatus.EXPIRED:
            raise LabelingError("This solution is already finished.")
        campaign = assignment.solution.campaign
        labeler_membership(campaign, user)
        solution = Solution.objects.select_for_update().get(pk=assignment.solution_id)
        gold = solution.is_quality_control or solution.is_screening
        if not gold and solution.label_count >= campaign.overlap:
            raise LeaseExpired("Your lease expired and this solution went to another labeler. The ratings you "
                               "gave are kept; start labeling to get a new solution.")
        if _open_assignment(campaign, user) is not None:
            raise LabelingError("Finish your open solution first.")
        Solution.objects.filter(pk=solution.pk).update(label_count=F("label_count") + 1)
        assignment.status = AssignmentStatus.LEASED
        assignment.lease_expires_at = now + timedelta(minutes=campaign.lease_minutes)
        assignment.save(update_fields=["status", "lease_expires_at", "updated_at"])
        return assignment


def finish_and_lease_next(assignment_id: int, user: User, *, now: datetime | None = None) -> LeaseOutcome:
    """The "Submit" / "next solution" control: submit an open pass (rules apply), then lease the next one."""
    assignment = Assignment.objects.select_related("solution__campaign").filter(pk=assignment_id).first()
    permissions.require(permissions.owns_assignment, user, assignment, "This is not your assignment.", error=NotAllowed)
    assert assignment is not None  # owns_assignment refuses None
    if assignment.status == AssignmentStatus.LEASED:
        submit_assignment(assignment_id, user=user, now=now)
    return lease_next_solution(assignment.solution.campaign, user, now=now)

"""Who may do what: one notion of staff, one role lookup, and the predicates that every page, API endpoint and
service asks. Nobody else decides access.

* Staff (an active user with ``is_staff`` or ``is_superuser``) runs the site: every campaign's management, research
  and reward-model work. Staff does not label: a labeler's work is tied to an active membership (screening, leases).
* Members: an active ``Membership`` gives one role in one campaign.
  - labelers and campaign admins label (``can_label``); researchers only read;
  - researchers and campaign admins read labels, datasets and metrics and run reward-model work (``can_research``);
  - campaign admins manage the campaign, import solutions and start labeling rounds and sampling (``can_manage``).

Where they are checked: **a service that acts for a user checks** — it takes ``user`` (None is the system: a
command, a periodic task) and calls ``require(predicate, user, campaign, message)`` before it writes, so every
caller (page, API, command, task) goes through the same rule. Pages and the API ask the same predicate only to
answer early (403 before reading a body) or to hide what the user may not see (404); they turn ``NotAllowed``
into a 403. The DRF classes at the end are the same predicates as object permissions, for the API's viewsets.

Labeling is held to the same layer: leasing, the workspace read and every rating write call ``require`` with
``is_signed_in``, ``owns_assignment`` (a pass is its labeler's alone), ``labels_under`` / ``can_label`` /
``labels_on`` (an active labeling membership), passing ``error=`` the labeling refusal (``annotate.workspace.
NotAllowed``, a ``LabelingError``) so that pages and the API answer those refusals as labeling errors, as before.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Exists, OuterRef, QuerySet
from rest_framework import permissions
from rest_framework.request import Request

from .models import Assignment, Campaign, Membership, Role

LABELING_ROLES = (Role.LABELER, Role.ADMIN)
RESEARCH_ROLES = (Role.ADMIN, Role.RESEARCHER)


def _signed_in(user: Any) -> bool:
    """Anonymous users and deactivated accounts get nothing (a deactivated account cannot sign in either)."""
    return bool(getattr(user, "is_authenticated", False) and getattr(user, "is_active", False))


def is_staff(user: Any) -> bool:
    return _signed_in(user) and bool(user.is_staff or user.is_superuser)


# --- the role lookup ---------------------------------------------------------------------------------------------

def membership_of(user: Any, campaign: Campaign, *, lock: bool = False) -> Membership | None:
    """The user's active membership of the campaign, in one query (staff has none unless they joined it).
    ``lock`` takes it ``FOR UPDATE`` so that concurrent leases of one labeler queue up."""
    if not _signed_in(user):
        return None
    queryset = Membership.objects.filter(campaign=campaign, user=user, is_active=True)
    return (queryset.select_for_update() if lock else queryset).first()


def member_role(user: Any, campaign: Campaign) -> str | None:
    membership = membership_of(user, campaign)
    return membership.role if membership is not None else None


def role_in(user: Any, campaign: Campaign) -> str | None:
    """The role the user acts in for the campaign: staff acts as an admin; others by their active membership."""
    return Role.ADMIN if is_staff(user) else member_role(user, campaign)


def labeler_may_label() -> Exists:
    """``labels_on`` as a subquery over assignments (``solution__campaign_id``, ``labeler_id``): a rating write
    annotates its locked assignment with it as ``labeler_may_label``, so the check costs no second query."""
    return Exists(Membership.objects.filter(
        campaign_id=OuterRef("solution__campaign_id"), user_id=OuterRef("labeler_id"), is_active=True,
        role__in=LABELING_ROLES))


# --- predicates --------------------------------------------------------------------------------------------------

def is_signed_in(user: Any, target: object = None) -> bool:
    """Signed in with an active account: what labeling asks before anything else ("Log in to label.")."""
    return _signed_in(user)


def labels_under(user: Any, membership: Membership | None) -> bool:
    """``can_label`` on a membership already in hand (a lease locks it first): the user's own active membership
    in a role that labels."""
    return (membership is not None and membership.is_active and membership.role in LABELING_ROLES
            and membership.user_id == getattr(user, "pk", None))


def can_label(user: Any, campaign: Campaign) -> bool:
    """Labelers and campaign admins with an active membership; staff labels only as a member."""
    return labels_under(user, membership_of(user, campaign))


def owns_assignment(user: Any, assignment: Assignment | None) -> bool:
    """A pass is its labeler's alone: nobody else reads or writes it, not its campaign's admins, not staff (a
    missing assignment is refused the same way, so ids reveal nothing)."""
    return assignment is not None and assignment.labeler_id == getattr(user, "pk", None)


def labels_on(user: Any, assignment: Assignment) -> bool:
    """The assignment's labeler (the user) still labels in its campaign: one removed mid-lease writes no more.
    Answered from the ``labeler_may_label`` annotation when the assignment was loaded with it."""
    known = getattr(assignment, "labeler_may_label", None)
    if known is None:
        return can_label(user, assignment.solution.campaign)
    return bool(known) and owns_assignment(user, assignment)


def can_research(user: Any, campaign: Campaign | None) -> bool:
    """Read labels, datasets and metrics, run reward-model work. Campaign-less work (a dataset given by path) is
    for staff only."""
    if campaign is None:
        return is_staff(user)
    return role_in(user, campaign) in RESEARCH_ROLES


def can_manage(user: Any, campaign: Campaign) -> bool:
    """Staff, or an active admin member of this campaign."""
    return role_in(user, campaign) == Role.ADMIN


def can_import(user: Any, campaign: Campaign) -> bool:
    """Importing solutions changes what labelers are given: the managers' call."""
    return can_manage(user, campaign)


def can_reference_problem_bank(user: Any) -> bool:
    """The staff bank's problems (text, answer, solution) are copied into a campaign that references them: only
    staff and the system (``user`` None: commands, the demo loader) may reach them."""
    return user is None or bool(getattr(user, "is_staff", False))


def can_resplit(user: Any, campaign: Campaign) -> bool:
    """Re-splitting a solution's steps changes what labelers rate (or forks a labeled solution): managers only."""
    return can_manage(user, campaign)


def can_start_labeling_round(user: Any, campaign: Campaign) -> bool:
    """A labeling round puts new work in front of labelers: managers only."""
    return can_manage(user, campaign)


def can_start_sampling(user: Any, campaign: Campaign) -> bool:
    """Sampling spends the campaign's compute on the candidates a labeling round draws from: managers only."""
    return can_manage(user, campaign)


def can_start_machine_labeling(user: Any, campaign: Campaign) -> bool:
    """Machine labels sit beside the human ones in the workspace and the datasets: managers only."""
    return can_manage(user, campaign)


def can_run_models(user: Any, campaign: Campaign | None) -> bool:
    """Reward-model work on the campaign's data (training, scoring, pools, evaluations, comparisons, snapshots):
    whoever may research it."""
    return can_research(user, campaign)


# --- checking a predicate in a service ---------------------------------------------------------------------------

class NotAllowed(PermissionError):
    """The user may not do this; the message says who may."""


Predicate = Callable[[Any, Campaign], bool]
Target = TypeVar("Target")


def require(predicate: Callable[[Any, Target], bool], user: Any, target: Target, message: str, *,
            error: type[Exception] = NotAllowed) -> None:
    """What a service acting for ``user`` calls first: ``error`` (``NotAllowed``) unless ``predicate`` lets them
    act on ``target`` (a campaign, an assignment, a membership). ``user=None`` is the system (a command, a periodic
    task), which runs with the operator's authority. Labeling passes its own ``NotAllowed`` (a ``LabelingError``):
    its pages and API answer it with the labeling error's status and words."""
    if user is not None and not predicate(user, target):
        raise error(message)


# --- campaign sets -----------------------------------------------------------------------------------------------

def joined_campaigns(user: Any) -> QuerySet[Campaign]:
    """Campaigns the user is an active member of, in any role (staff included: a labeler's own list)."""
    if not _signed_in(user):
        return Campaign.objects.none()
    return Campaign.objects.filter(memberships__user=user, memberships__is_active=True).distinct()


def member_campaigns(user: Any) -> QuerySet[Campaign]:
    """Campaigns the user may see at all: any active membership (staff: all)."""
    if is_staff(user):
        return Campaign.objects.all()
    return joined_campaigns(user)


def _campaigns_with_role(user: Any, roles: tuple[str, ...]) -> QuerySet[Campaign]:
    if not _signed_in(user):
        return Campaign.objects.none()
    if is_staff(user):
        return Campaign.objects.all()
    return Campaign.objects.filter(memberships__user=user, memberships__is_active=True,
                                   memberships__role__in=roles).distinct()


def research_campaigns(user: Any) -> QuerySet[Campaign]:
    """Campaigns whose labels and datasets the user may read and whose reward-model work they may see."""
    return _campaigns_with_role(user, RESEARCH_ROLES)


def managed_campaigns(user: Any) -> QuerySet[Campaign]:
    return _campaigns_with_role(user, (Role.ADMIN,))


def can_research_any(user: Any) -> bool:
    """The reward-model area as a whole (and the nav's link to it)."""
    return is_staff(user) or research_campaigns(user).exists()


def can_manage_any(user: Any) -> bool:
    """The campaign-management workspace as a whole (and the nav's link to it)."""
    return is_staff(user) or managed_campaigns(user).exists()


# --- DRF object permissions --------------------------------------------------------------------------------------

def _campaign_of(obj: Any) -> Campaign:
    return obj if isinstance(obj, Campaign) else obj.campaign


class CanResearch(permissions.BasePermission):
    """Objects of a campaign (or the campaign) that only its researchers, admins and staff may read."""

    message = "Only the campaign's admins and researchers may do this."

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        return can_research(request.user, _campaign_of(obj))


class CanManage(permissions.BasePermission):
    """Campaign changes that only its admins and staff may make."""

    message = "Only the campaign's admins may do this."

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        return can_manage(request.user, _campaign_of(obj))


class CanImportSolutions(CanManage):
    message = "Only the campaign's admins can import solutions."

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        return can_import(request.user, _campaign_of(obj))


class CanReadMetrics(CanResearch):
    message = "Campaign metrics are for the campaign's admins and researchers."


class CanReadDatasets(CanResearch):
    message = "Labelers cannot read or download datasets; ask a campaign admin."

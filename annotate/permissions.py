"""Who may do what: one notion of staff, one role lookup, and the predicates that every page, API endpoint and
service asks. Nobody else decides access.

* Staff (an active user with ``is_staff`` or ``is_superuser``) runs the site: every campaign's management, research
  and reward-model work. Staff does not label: a labeler's work is tied to an active membership (screening, leases).
* Members: an active ``Membership`` gives one role in one campaign.
  - labelers and campaign admins label (``can_label``); researchers only read;
  - researchers and campaign admins read labels, datasets and metrics and run reward-model work (``can_research``);
  - campaign admins manage the campaign, import solutions and start labeling rounds and sampling (``can_manage``).

Where they are checked: **a service that acts for someone checks** — it takes an explicit actor (the user, or
``SYSTEM``: a command, a periodic task, the demo loader) and calls ``require(predicate, actor, campaign, message)``
before it writes, so every caller (page, API, command, task) goes through the same rule. The layer fails closed:
services take the actor without a default, and ``None`` (a forgotten user) is refused, never taken for the system.
Pages and the API ask the same predicate only to
answer early (403 before reading a body) or to hide what the user may not see (404); they turn ``NotAllowed``
into a 403. The DRF classes at the end are the same predicates as object permissions, for the API's viewsets.

Labeling is held to the same layer: leasing, the workspace read and every rating write call ``require`` with
``is_signed_in``, ``owns_assignment`` (a pass is its labeler's alone), ``labels_under`` / ``can_label`` /
``labels_on`` (an active labeling membership), passing ``error=`` the labeling refusal (``annotate.services.
errors.NotAllowed``, a ``LabelingError``) so that pages and the API answer those refusals as labeling errors, as before.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeAlias, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import Exists, OuterRef, QuerySet
from rest_framework import permissions
from rest_framework.request import Request

from .models import Assignment, Campaign, Membership, Role


class SystemActor:
    """The operator's own authority (a management command, a periodic task, the demo loader, a later stage of work
    someone was allowed to start): ``require`` lets it through. One instance, ``SYSTEM``; it is no account."""

    is_authenticated: Final = False
    is_active: Final = False
    pk: Final = None

    def __repr__(self) -> str:
        return "SYSTEM"


SYSTEM: Final = SystemActor()
#: who a service acts for: a user (perhaps anonymous) or ``SYSTEM``
Actor: TypeAlias = "AbstractBaseUser | AnonymousUser | SystemActor"

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


def can_reference_problem_bank(actor: Actor) -> bool:
    """The staff bank's problems (text, answer, solution) are copied into a campaign that references them: only
    active staff accounts and ``SYSTEM`` (commands, the demo loader) may reach them; ``None`` may not."""
    return actor is SYSTEM or is_staff(actor)


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


def can_manage_endpoints(user: Any, campaign: Campaign | None) -> bool:
    """Served-model endpoints: a campaign's are its managers'; the staff-wide ones (no campaign) staff's only."""
    return can_manage(user, campaign) if campaign is not None else is_staff(user)


# --- checking a predicate in a service ---------------------------------------------------------------------------

class NotAllowed(PermissionError):
    """The user may not do this; the message says who may."""


Predicate = Callable[[Any, Campaign], bool]
Target = TypeVar("Target")


def require(predicate: Callable[[Any, Target], bool], actor: Actor, target: Target, message: str, *,
            error: type[Exception] = NotAllowed) -> None:
    """What a service acting for ``actor`` calls first: ``error`` (``NotAllowed``) unless ``predicate`` lets them
    act on ``target`` (a campaign, an assignment, a membership). ``SYSTEM`` (a command, a periodic task) runs with
    the operator's authority; ``None`` is refused whatever the predicate says. Labeling passes its own
    ``NotAllowed`` (a ``LabelingError``): its pages and API answer it with the labeling error's status and words."""
    if actor is SYSTEM:
        return
    if actor is None or not predicate(actor, target):
        raise error(message)


def account_of(actor: Actor) -> Any:
    """The account to record as a row's creator or starter: the signed-in user, else None (``SYSTEM``, anonymous)."""
    return actor if _signed_in(actor) else None


def actor_for(account: AbstractBaseUser | None, *, system: bool = False) -> Actor:
    """Who a later stage of recorded work acts as: ``SYSTEM`` for work the system started, else the account that
    started it — anonymous once that account is deleted, so the stage's check refuses it."""
    if system:
        return SYSTEM
    return account if account is not None else AnonymousUser()


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

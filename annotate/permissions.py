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
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from rest_framework import permissions
from rest_framework.request import Request

from .models import Campaign, Membership, Role

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


def labeling_membership(user: Any, campaign: Campaign, *, lock: bool = False) -> Membership | None:
    """The membership a labeler works under (screening, quality flags), or None when they may not label here."""
    membership = membership_of(user, campaign, lock=lock)
    return membership if membership is not None and membership.role in LABELING_ROLES else None


# --- predicates --------------------------------------------------------------------------------------------------

def can_label(user: Any, campaign: Campaign) -> bool:
    """Labelers and campaign admins with an active membership; staff labels only as a member."""
    return member_role(user, campaign) in LABELING_ROLES


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


def require(predicate: Predicate, user: Any, campaign: Campaign | None, message: str) -> None:
    """What a service acting for ``user`` calls first: ``NotAllowed`` unless ``predicate`` lets them.
    ``user=None`` is the system (a command, a periodic task), which runs with the operator's authority."""
    if user is not None and not predicate(user, campaign):  # type: ignore[arg-type]  # can_run_models takes None
        raise NotAllowed(message)


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

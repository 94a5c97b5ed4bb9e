"""Who may read what: one place for the API, the researcher pages and downloads.

* Campaign list: every campaign the user is an active member of (staff: all).
* Problems, solutions, labels, dataset versions and downloads: researchers and admins of the
  campaign (staff: all). Labelers label through the labeling endpoints and cannot download datasets.
* Importing solutions: campaign admins (and staff).
"""
from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db.models import QuerySet

from annotate.models import Campaign, Membership, Role

User = AuthUser | AnonymousUser
READER_ROLES = (Role.RESEARCHER, Role.ADMIN)


def _is_staff(user: User) -> bool:
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def member_campaigns(user: User) -> QuerySet[Campaign]:
    if not user.is_authenticated:
        return Campaign.objects.none()
    if _is_staff(user):
        return Campaign.objects.all()
    return Campaign.objects.filter(memberships__user=user, memberships__is_active=True).distinct()


def readable_campaigns(user: User) -> QuerySet[Campaign]:
    """Campaigns whose labels and datasets the user may read and download."""
    if not user.is_authenticated:
        return Campaign.objects.none()
    if _is_staff(user):
        return Campaign.objects.all()
    return Campaign.objects.filter(memberships__user=user, memberships__is_active=True,
                                   memberships__role__in=READER_ROLES).distinct()


def role_in(user: User, campaign: Campaign) -> str | None:
    if not user.is_authenticated:
        return None
    if _is_staff(user):
        return Role.ADMIN
    return Membership.objects.filter(user=user, campaign=campaign, is_active=True).values_list(
        "role", flat=True).first()


def can_import(user: User, campaign: Campaign) -> bool:
    return role_in(user, campaign) == Role.ADMIN

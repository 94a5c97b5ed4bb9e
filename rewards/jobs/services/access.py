"""Who may see and start reward-model work: staff, and a campaign's active admins and researchers."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from annotate.models import Campaign, Role

ALLOWED_ROLES = (Role.ADMIN, Role.RESEARCHER)


class AccessDenied(PermissionError):
    """The user may not see or change this campaign's reward-model work."""


def accessible_campaigns(user: Any) -> QuerySet[Campaign]:
    if not getattr(user, "is_authenticated", False):
        return Campaign.objects.none()
    if user.is_staff:
        return Campaign.objects.all()
    return Campaign.objects.filter(memberships__user=user, memberships__is_active=True,
                                   memberships__role__in=ALLOWED_ROLES).distinct()


def can_access(user: Any, campaign: Campaign | None) -> bool:
    """Campaign-less work (a dataset given by path) is for staff only."""
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_staff:
        return True
    if campaign is None:
        return False
    return campaign.memberships.filter(user=user, is_active=True, role__in=ALLOWED_ROLES).exists()


def has_any_access(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False)) and (user.is_staff or accessible_campaigns(user).exists())


def require_access(user: Any, campaign: Campaign | None) -> None:
    if not can_access(user, campaign):
        raise AccessDenied(f"not an admin or researcher of campaign {campaign.slug if campaign else '(none)'}")

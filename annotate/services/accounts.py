"""Accounts a campaign admin makes for new people: a user and their membership of that campaign, in one step.

Inviting (``campaigns.add_member``) covers people who already have an account; a newcomer has none, and the site
has no sign-up page on purpose (who may label is the admins' call). The password is the admin's choice or a
generated one, which the caller shows once: it is stored only as Django's hash.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction

from .. import permissions
from ..models import Campaign, Membership, Role
from .campaigns import CampaignAdminError

GENERATED_PASSWORD_BYTES = 12  # 16 URL-safe characters


@dataclass(frozen=True)
class NewAccount:
    """The account made, and the generated password to show once ("" when the admin chose the password)."""

    user: Any
    membership: Membership
    generated_password: str


def create_member_account(campaign: Campaign, *, username: str, role: str, created_by: Any, email: str = "",
                          password: str = "") -> NewAccount:
    """A new active account that is at once a member of ``campaign`` in ``role`` (no invitation to accept: the
    admin made it for that person). A taken user name, a bad e-mail address or a password Django's validators
    refuse is a ``CampaignAdminError`` naming the field."""
    permissions.require(permissions.can_manage, created_by, campaign,
                        f"only staff and admins of campaign {campaign.slug} create accounts for it")
    if role not in Role.values:
        raise CampaignAdminError("role", f"must be one of {', '.join(Role.values)}, got {role!r}")
    User = get_user_model()
    username, email = username.strip(), email.strip()
    try:
        User.username_validator(username)
    except ValidationError as error:
        raise CampaignAdminError("username", " ".join(error.messages)) from None
    if not username:
        raise CampaignAdminError("username", "is required.")
    if User.objects.filter(username__iexact=username).exists():
        raise CampaignAdminError("username", f"{username!r} is taken: invite that account instead, or pick "
                                             "another name.")
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise CampaignAdminError("email", f"{email!r} is not an e-mail address.") from None
    generated = "" if password else secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)
    if password:
        try:
            validate_password(password, user=User(username=username, email=email))
        except ValidationError as error:
            raise CampaignAdminError("password", " ".join(error.messages)) from None
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email, password=password or generated)
            membership = Membership.objects.create(campaign=campaign, user=user, role=role)
    except IntegrityError:  # made by someone else between the check and the insert
        raise CampaignAdminError("username", f"{username!r} is taken: pick another name.") from None
    return NewAccount(user=user, membership=membership, generated_password=generated)

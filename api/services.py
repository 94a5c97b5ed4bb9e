"""Personal API tokens: created once (the raw value is shown one time), stored hashed, revocable."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from .models import TOKEN_PREFIX, ApiToken, hash_token


class TokenError(Exception):
    """A token request the rules refuse; the message names the field."""


def create_token(user: User, *, name: str, scope: str) -> tuple[ApiToken, str]:
    """Make a token for ``user``; returns the record and the raw value, which is never stored."""
    name = (name or "").strip()
    if not name:
        raise TokenError("name: give the token a name (e.g. the script that uses it)")
    if len(name) > 100:
        raise TokenError("name: at most 100 characters")
    if scope not in ApiToken.Scope.values:
        raise TokenError(f"scope: must be one of {', '.join(ApiToken.Scope.values)}, got {scope!r}")
    raw = ApiToken.generate()
    token = ApiToken.objects.create(user=user, name=name, scope=scope, prefix=raw[:len(TOKEN_PREFIX) + 8],
                                    key_hash=hash_token(raw))
    return token, raw


def revoke_token(user: User, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens (idempotent)."""
    token = ApiToken.objects.filter(pk=token_id, user=user).first()
    if token is None:
        raise TokenError("token: no such token of yours")
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    return token


def authenticate_token(raw: str) -> ApiToken | None:
    """The live token for a raw value, its user loaded; touches ``last_used_at`` at most once a minute."""
    if not raw.startswith(TOKEN_PREFIX):
        return None
    token = (ApiToken.objects.select_related("user")
             .filter(key_hash=hash_token(raw), revoked_at__isnull=True).first())
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=settings.STEPLAB_TOKEN_TOUCH_SECONDS)
    if token.last_used_at is not None and token.last_used_at >= stale:
        return token  # touched within the interval, as just read: no UPDATE round trip on every request
    # Conditional UPDATE: concurrent requests write at most once per interval.
    if ApiToken.objects.filter(pk=token.pk).filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)).update(
            last_used_at=now):
        token.last_used_at = now
    return token

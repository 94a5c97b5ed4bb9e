"""Login with rate limiting, for the site login and Django's admin login alike: password guessing is slowed per
client address and per account name.

Every attempt is counted before the password is checked (so concurrent guesses cannot all slip under the limit)
and a successful login gives its count back: only failures use up the allowance, so a labeling team behind one
address is never locked out by logging in. The account name is counted as authentication reads it (stripped,
NFKC-normalised), so `" labeler"` and a full-width `ｌabeler` share `labeler`'s allowance.

The counters live in the default cache (Redis in production; the embedded default's local memory cache is per
process, which is enough for the single-process demo server).
"""
from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, UsernameField
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

LIMITED_MESSAGE = "Too many login attempts. Wait a minute and try again."
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """`"10/m"` → (10 attempts, 60 s); `"5/10m"` → (5, 600)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*", rate)
    if match is None:
        raise ValueError(f"STEPLAB_LOGIN_RATE: expected e.g. '10/m', got {rate!r}")
    return int(match[1]), int(match[2] or 1) * _PERIODS[match[3]]


def normalised_username(raw: object) -> str:
    """The name authentication looks up: Django's UsernameField strips and NFKC-normalises the form value."""
    name = UsernameField().to_python(raw if isinstance(raw, str) else "")
    return name if isinstance(name, str) else ""


def client_address(request: HttpRequest) -> str:
    """The client's address; an IPv6 client is counted by its /64, which one host usually owns whole."""
    address = request.META.get("REMOTE_ADDR") or "unknown"
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False).network_address)
    return str(parsed)


@dataclass
class LoginAttempt:
    """One counted attempt: the cache keys it incremented, to give back if the login succeeds."""

    keys: list[str]
    limited: bool

    def succeeded(self) -> None:
        for key in self.keys:
            try:
                cache.decr(key)
            except Exception:  # noqa: BLE001 - expired meanwhile, or the cache is down: nothing to give back
                logger.debug("login counter %s not given back", key, exc_info=True)


def count_attempt(request: HttpRequest, username: str) -> LoginAttempt:
    """Count this attempt against the address and the account name; fail open (log, allow) when the cache is
    down, so an outage of Redis never locks labelers out — the database, which holds the passwords, decides."""
    limit, period = parse_rate(settings.STEPLAB_LOGIN_RATE)
    window = int(time.time()) // period
    keys: list[str] = []
    limited = False
    try:
        for kind, value in (("ip", client_address(request)), ("user", username)):
            digest = hashlib.sha256(value.encode()).hexdigest()[:32]
            key = f"login-attempts:{kind}:{period}:{window}:{digest}"
            cache.add(key, 0, period + 5)
            count = cache.incr(key)
            keys.append(key)
            limited = limited or count > limit
    except Exception:  # noqa: BLE001 - any cache failure
        logger.warning("login rate limiter unavailable (cache down); allowing the attempt", exc_info=True)
        return LoginAttempt(keys=keys, limited=False)
    return LoginAttempt(keys=keys, limited=limited)


class RateLimitedFormMixin:
    """Checks the limit before the password (a limited attempt never reaches authentication) and gives the
    attempt back when the credentials were right."""

    request: HttpRequest | None
    data: Any

    def clean(self) -> dict[str, Any]:
        # A mixin over AuthenticationForm: super().clean() and add_prefix are the form's, which mypy does not see.
        if self.request is None:  # not a login view (nothing to count per client)
            return super().clean()  # type: ignore[misc]
        attempt = count_attempt(self.request, normalised_username(self.data.get(self.add_prefix("username"))))  # type: ignore[attr-defined]
        if attempt.limited:
            # read by the login view to answer 429; HttpRequest declares no such attribute
            self.request.login_rate_limited = True  # type: ignore[attr-defined]
            raise forms.ValidationError(LIMITED_MESSAGE, code="rate_limited")
        cleaned = super().clean()  # type: ignore[misc]
        attempt.succeeded()
        return cleaned


class LoginForm(RateLimitedFormMixin, AuthenticationForm):
    pass


class AdminLoginForm(RateLimitedFormMixin, AdminAuthenticationForm):
    pass


def _too_many(response: HttpResponse, request: HttpRequest) -> HttpResponse:
    if getattr(request, "login_rate_limited", False):
        response.status_code = 429
    return response


class RateLimitedLoginView(LoginView):
    authentication_form = LoginForm

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        response = self.render_to_response(self.get_context_data(
            form=form, rate_limited=getattr(self.request, "login_rate_limited", False)))
        return _too_many(response, self.request)


admin.site.login_form = AdminLoginForm


def admin_login(request: HttpRequest) -> HttpResponse:
    """Django's admin login with the same limiter (its form carries the check; here the answer becomes a 429)."""
    return _too_many(admin.site.login(request), request)

"""Login with rate limiting, for the site login and Django's admin login alike, and the password-change form's old
password: guessing is slowed without letting anyone lock someone else out.

The policy (docs/configuration.md):

* ``STEPLAB_LOGIN_RATE`` (10/m): failed attempts at one account name from one client address — the pair. Another
  address's failures never use up this allowance.
* ``STEPLAB_LOGIN_ADDRESS_RATE`` (30/m): failed attempts from one address over all names (trying many accounts).
* ``STEPLAB_LOGIN_ACCOUNT_RATE`` (20/h): how many *different* addresses may fail at one account name. Past it
  (a guess spread over many addresses), the account can still be signed in to from an address that signed in to
  it before (30 days), and from no other until the rate falls: one address's failures count once, so nobody
  locks an account alone.

Windows slide: the count is the current period's plus the previous period's share that still lies within the
last period (two counters, each an atomic increment), so attempts just before and after a period boundary are
counted together. Every attempt is counted before the password is checked (concurrent guesses cannot all slip
under the limit) and a successful login gives its count back: only failures use up an allowance, so a labeling
team behind one address is never locked out by logging in. The account name is counted as authentication reads
it (stripped, NFKC-normalised), so ``" labeler"`` and a full-width ``ｌabeler`` share ``labeler``'s allowance.

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
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, UsernameField
from django.contrib.auth.views import LoginView, PasswordChangeView
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


KNOWN_ADDRESS_SECONDS = 30 * 86400  # how long an address that signed in to an account stays known to it


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def _sliding(kind: str, value: str, rate: str, now: float, *, add: bool = True) -> tuple[float, str]:
    """This period's count (incremented first when ``add``) plus the share of the previous period's count that
    still lies within the last ``period`` seconds; and this period's counter (to give an attempt back)."""
    _, period = parse_rate(rate)
    window = int(now // period)
    key = f"login-attempts:{kind}:{period}:{window}:{_digest(value)}"
    if add:
        cache.add(key, 0, 2 * period + 5)
        current = cache.incr(key)
    else:
        current = cache.get(key, 0)
    previous = cache.get(f"login-attempts:{kind}:{period}:{window - 1}:{_digest(value)}", 0)
    return current + previous * (1 - (now % period) / period), key


def _limit(rate: str) -> int:
    return parse_rate(rate)[0]


@dataclass
class LoginAttempt:
    """One counted attempt: the counters it incremented, to give back if the login succeeds (or to charge to the
    account's failing addresses if it fails)."""

    username: str
    address: str
    now: float
    keys: list[str]
    limited: bool

    def succeeded(self) -> None:
        try:
            for key in self.keys:
                cache.decr(key)
            cache.set(f"login-known:{_digest(self.username)}:{_digest(self.address)}", 1, KNOWN_ADDRESS_SECONDS)
        except Exception:  # noqa: BLE001 - expired meanwhile, or the cache is down: nothing to give back
            logger.debug("login counters of %s not given back", self.username, exc_info=True)

    def failed(self) -> None:
        """This address failed at this account: counted once per period among the account's failing addresses."""
        try:
            _, period = parse_rate(settings.STEPLAB_LOGIN_ACCOUNT_RATE)
            window = int(self.now // period)
            first = cache.add(f"login-failing:{period}:{window}:{_digest(self.username)}:{_digest(self.address)}",
                              1, 2 * period + 5)
            if first:
                _sliding("account", self.username, settings.STEPLAB_LOGIN_ACCOUNT_RATE, self.now)
        except Exception:  # noqa: BLE001 - the cache is down: the pair and address limits failed open too
            logger.debug("failing address of %s not counted", self.username, exc_info=True)


def count_attempt(request: HttpRequest, username: str) -> LoginAttempt:
    """Count this attempt against the pair (name, address) and the address, and look at the account's failing
    addresses; fail open (log, allow) when the cache is down, so an outage of Redis never locks labelers out —
    the database, which holds the passwords, decides."""
    address, now = client_address(request), time.time()
    attempt = LoginAttempt(username=username, address=address, now=now, keys=[], limited=False)
    try:
        for kind, value, rate in (("pair", f"{username}\0{address}", settings.STEPLAB_LOGIN_RATE),
                                  ("ip", address, settings.STEPLAB_LOGIN_ADDRESS_RATE)):
            count, key = _sliding(kind, value, rate, now)
            attempt.keys.append(key)
            attempt.limited = attempt.limited or count > _limit(rate)
        failing, _ = _sliding("account", username, settings.STEPLAB_LOGIN_ACCOUNT_RATE, now, add=False)
        if failing >= _limit(settings.STEPLAB_LOGIN_ACCOUNT_RATE) and not cache.get(
                f"login-known:{_digest(username)}:{_digest(address)}"):
            attempt.limited = True
    except Exception:  # noqa: BLE001 - any cache failure
        logger.warning("login rate limiter unavailable (cache down); allowing the attempt", exc_info=True)
        attempt.keys, attempt.limited = [], False
    return attempt


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
        try:
            cleaned = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            attempt.failed()
            raise
        attempt.succeeded()
        return cleaned


class LoginForm(RateLimitedFormMixin, AuthenticationForm):
    pass


class AdminLoginForm(RateLimitedFormMixin, AdminAuthenticationForm):
    pass


class RateLimitedPasswordChangeForm(PasswordChangeForm):
    """The old password is a password guess like a login's: counted per account (``STEPLAB_LOGIN_RATE``), each
    wrong one using up the allowance, a right one giving its count back."""

    request: HttpRequest | None = None

    def clean_old_password(self) -> str:
        key = ""
        try:
            count, key = _sliding("change", self.user.get_username(), settings.STEPLAB_LOGIN_RATE, time.time())
            limited = count > _limit(settings.STEPLAB_LOGIN_RATE)
        except Exception:  # noqa: BLE001 - the cache is down: the password check decides, as at login
            logger.warning("password-change limiter unavailable (cache down)", exc_info=True)
            limited = False
        if limited:
            if self.request is not None:
                self.request.login_rate_limited = True  # type: ignore[attr-defined]
            raise forms.ValidationError(LIMITED_MESSAGE, code="rate_limited")
        old_password = super().clean_old_password()
        try:
            cache.decr(key)
        except Exception:  # noqa: BLE001 - expired meanwhile, or the cache is down: nothing to give back
            logger.debug("password-change counter not given back", exc_info=True)
        return old_password


class RateLimitedPasswordChangeView(PasswordChangeView):
    form_class = RateLimitedPasswordChangeForm

    def get_form(self, form_class: Any = None) -> Any:
        form: Any = super().get_form(form_class)  # a RateLimitedPasswordChangeForm: form_class says so
        form.request = self.request
        return form

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        return _too_many(super().form_invalid(form), self.request)


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

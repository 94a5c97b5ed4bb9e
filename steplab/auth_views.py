"""The site login, Django's admin login and the password-change form, each guarded by the login limiter
(``steplab.login_limits``): a refused attempt never reaches the password check and is answered 429."""
from __future__ import annotations

import ipaddress
import time
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, UsernameField
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.http import HttpRequest, HttpResponse

from steplab import login_limits

LIMITED_MESSAGE = "Too many login attempts. Wait a minute and try again."
LIMITED = "rate_limited"  # the refusal's error code, which the views answer with a 429


def client_address(request: HttpRequest) -> str:
    """The client's address; an IPv6 client is counted by its /64, which one host usually owns whole."""
    address = request.META.get("REMOTE_ADDR") or "unknown"
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    return str(ipaddress.ip_network(f"{parsed}/64", strict=False).network_address if parsed.version == 6 else parsed)


class RateLimitedFormMixin:
    """A login form's check: the name counted as authentication reads it (stripped, NFKC-normalised), so
    ``" labeler"`` and a full-width ``ｌabeler`` share ``labeler``'s allowance."""

    request: HttpRequest | None
    data: Any

    def clean(self) -> dict[str, Any]:
        # A mixin over AuthenticationForm: super().clean() and add_prefix are the form's, which mypy does not see.
        if self.request is None:  # not a login view (nothing to count per client)
            return super().clean()  # type: ignore[misc]
        raw = self.data.get(self.add_prefix("username"))  # type: ignore[attr-defined]
        name = UsernameField().to_python(raw if isinstance(raw, str) else "") or ""
        address, now = client_address(self.request), time.time()
        limited, keys = login_limits.attempt([("pair", f"{name}\0{address}", "STEPLAB_LOGIN_RATE"),
                                              ("ip", address, "STEPLAB_LOGIN_ADDRESS_RATE")],
                                             now=now, account=(name, address))
        if limited:
            raise forms.ValidationError(LIMITED_MESSAGE, code=LIMITED)
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            login_limits.failed(name, address, now=now)
            raise
        login_limits.succeeded(keys, account=(name, address))
        return cleaned


class LoginForm(RateLimitedFormMixin, AuthenticationForm):
    pass


class AdminLoginForm(RateLimitedFormMixin, AdminAuthenticationForm):
    pass


class RateLimitedPasswordChangeForm(PasswordChangeForm):
    """The old password is a password guess like a login's: counted per account (``STEPLAB_LOGIN_RATE``)."""

    def clean_old_password(self) -> str:
        limited, keys = login_limits.attempt([("change", self.user.get_username(), "STEPLAB_LOGIN_RATE")],
                                             now=time.time())
        if limited:
            raise forms.ValidationError(LIMITED_MESSAGE, code=LIMITED)
        old_password = super().clean_old_password()
        login_limits.succeeded(keys)
        return old_password


def _limited(form: Any) -> bool:
    return form is not None and any(error.code == LIMITED for errors in form.errors.as_data().values()
                                    for error in errors)


def _too_many(response: HttpResponse, form: Any) -> HttpResponse:
    if _limited(form):
        response.status_code = 429
    return response


class RateLimitedPasswordChangeView(PasswordChangeView):
    form_class = RateLimitedPasswordChangeForm

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        return _too_many(super().form_invalid(form), form)


class RateLimitedLoginView(LoginView):
    authentication_form = LoginForm

    def form_invalid(self, form: forms.Form) -> HttpResponse:
        return _too_many(self.render_to_response(self.get_context_data(form=form, rate_limited=_limited(form))), form)


admin.site.login_form = AdminLoginForm


def admin_login(request: HttpRequest) -> HttpResponse:
    """Django's admin login with the same limiter (its form carries the check; here the answer becomes a 429)."""
    response = admin.site.login(request)
    return _too_many(response, (getattr(response, "context_data", None) or {}).get("form"))

"""Login with rate limiting: password guessing is slowed per client address and per account name.

django-ratelimit counts attempts in the default cache (Redis in production; the embedded default's local
memory cache is per process, which is enough for the single-process demo server).
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django_ratelimit.core import is_ratelimited


logger = logging.getLogger(__name__)


def _limited(request: HttpRequest) -> bool:
    """Count this attempt; fail open (log, allow) when the cache is down, so an outage of Redis never locks
    labelers out — the database, which holds the passwords, still decides."""
    try:
        return any(
            is_ratelimited(request, group="login", key=key, rate=settings.STEPLAB_LOGIN_RATE, method="POST",
                           increment=True)
            for key in ("ip", "post:username")
        )
    except Exception:  # noqa: BLE001 - any cache failure
        logger.warning("login rate limiter unavailable (cache down); allowing the attempt", exc_info=True)
        return False


class RateLimitedLoginView(LoginView):
    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if _limited(request):
            response = self.render_to_response(self.get_context_data(
                form=self.get_form(), rate_limited=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

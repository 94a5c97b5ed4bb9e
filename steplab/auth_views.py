"""Login with rate limiting: password guessing is slowed per client address and per account name.

django-ratelimit counts attempts in the default cache (Redis in production; the embedded default's local
memory cache is per process, which is enough for the single-process demo server).
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django_ratelimit.core import is_ratelimited


class RateLimitedLoginView(LoginView):
    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        rate = settings.STEPLAB_LOGIN_RATE
        limited = any(
            is_ratelimited(request, group="login", key=key, rate=rate, method="POST", increment=True)
            for key in ("ip", "post:username")
        )
        if limited:
            response = self.render_to_response(self.get_context_data(
                form=self.get_form(), rate_limited=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

"""Security headers that Django 5.2 does not set by itself, static files, a clean 503 while the database is down,
and the site's own 403/404 pages for a browser the API refuses."""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.views import exception_handler
from whitenoise.middleware import WhiteNoiseMiddleware

logger = logging.getLogger(__name__)

# Only self-hosted scripts (htmx, KaTeX, Chart.js, our own); KaTeX's output needs inline style attributes.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    """Every answer, the API's docs included: Swagger UI's files come from the sidecar package and its start-up
    script is a file of its own (the split view), so 'self' is all it needs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponseBase | None:
    """DRF's answer, except to a browser that opened an API link (a dataset file) and was refused or sent to
    nothing: the site's own 403/404 page, with its navigation, instead of the browsable API's bare one."""
    response = exception_handler(exc, context)
    request = context.get("request")
    if response is None or response.status_code not in (403, 404) or not isinstance(
            getattr(request, "accepted_renderer", None), BrowsableAPIRenderer):
        return response
    page = render(request._request, f"{response.status_code}.html",  # type: ignore[union-attr]
                  {"exception": str(getattr(exc, "detail", "")) if response.status_code == 403 else ""},
                  status=response.status_code)
    return page


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, with STATIC_ROOT made first: WhiteNoise warns about a missing folder, and until the first
    ``collectstatic`` there is none (the files are served from the finders meanwhile)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        super().__init__(get_response)


class DatabaseUnavailableMiddleware:
    """A database that is down or restarting answers 503 with Retry-After, not a 500 page.

    The request's transaction has rolled back, so nothing of it was saved; the status says "try again"
    (the workspace re-sends a lost rating by itself), and the body needs no database to render.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        logger.warning("database unavailable for %s %s: %s", request.method, request.path, exception)
        response = HttpResponse("The database is unavailable right now: nothing from this request was saved. "
                                "Try again in a few seconds.\n", status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = "2"
        return response

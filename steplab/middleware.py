"""Security headers that Django 5.2 does not set by itself, and a clean 503 while the database is down."""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

# Only self-hosted scripts (htmx, KaTeX, Chart.js, our own); KaTeX's output needs inline style attributes.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/api/docs"):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response


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

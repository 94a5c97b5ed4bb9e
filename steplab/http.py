"""The request type the views are written against."""
from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class AppRequest(HttpRequest):
    """For type checking only: Django passes a plain HttpRequest, whose ``user`` login_required has checked and
    whose ``htmx`` django-htmx's middleware has added; this says so to mypy instead of a cast in every view."""

    user: User
    htmx: HtmxDetails

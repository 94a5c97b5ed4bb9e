"""Labeler-facing pages. Thin: every rule lives in ``annotate.services``."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .models import Campaign


@login_required
def home(request: HttpRequest) -> HttpResponse:
    campaigns = Campaign.objects.filter(memberships__user=request.user, memberships__is_active=True).order_by("name")
    return render(request, "annotate/home.html", {"campaigns": campaigns})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})

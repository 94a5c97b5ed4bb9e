"""Researcher pages (session login): the list of dataset versions. Rules live in services, reads in ``selectors``;
the API token pages are the ``api`` app's (``api.views``)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from annotate.permissions import can_research_any, research_campaigns

from . import selectors


@login_required
def datasets_page(request: HttpRequest) -> HttpResponse:
    rows = selectors.version_rows(selectors.ready_versions(request.user))
    campaigns = research_campaigns(request.user).order_by("name")
    return render(request, "rewards/datasets.html", {"rows": rows, "campaigns": campaigns,
                                                     "may_research": can_research_any(request.user)})

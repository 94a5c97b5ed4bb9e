"""The endpoints pages: a campaign's (its admins and staff) and the staff-wide list (staff only). Register an
endpoint, test its connection (the served model list or a short sanitised error), remove it."""
from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from annotate import permissions
from annotate.models import Campaign
from annotate.views_manage import campaign_admin_required

from . import services
from .forms import ActionForm, RegisterForm
from .selectors import managed_endpoints


def _page(request: HttpRequest, campaign: Campaign | None) -> HttpResponse:
    endpoints = managed_endpoints(request.user, campaign)
    form = RegisterForm()
    result: tuple[bool, str] | None = None
    status = 200
    if request.method == "POST" and "action" in request.POST:
        action = ActionForm(request.POST)
        if not action.is_valid():
            return HttpResponse("Choose an action and an endpoint.", status=400, content_type="text/plain")
        endpoint = endpoints.filter(pk=action.cleaned_data["endpoint"]).first()
        if endpoint is None:
            raise Http404("no such endpoint here")
        if action.cleaned_data["action"] == "delete":
            services.delete_endpoint(request.user, endpoint=endpoint)
        else:
            result = services.check_connection(request.user, endpoint=endpoint)
    elif request.method == "POST":
        form = RegisterForm(request.POST)
        if form.is_valid():
            try:
                services.register_endpoint(request.user, campaign=campaign, **form.cleaned_data)
                form = RegisterForm()
            except services.EndpointRefused as refused:
                form.add_error(refused.field, str(refused))
        if form.errors:
            status = 400
    return render(request, "endpoints/list.html", {
        "campaign": campaign, "form": form, "endpoints": endpoints, "result": result,
        "allow_applies": campaign is None or permissions.is_staff(request.user),
    }, status=status)


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def campaign_endpoints(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    return _page(request, campaign)


@require_http_methods(["GET", "POST"])
def staff_endpoints(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not permissions.can_manage_endpoints(request.user, None):
        raise PermissionDenied("staff-wide endpoints are staff's")
    return _page(request, None)

"""The LLM judge's page of a campaign: start a judge job on an endpoint, see the campaign's judge jobs, resume one
that stopped. Each POST validates through ``LlmJudgeForm`` and calls one service."""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import Campaign
from annotate.permissions import can_start_machine_labeling
from endpoints.models import Endpoint
from endpoints.selectors import usable_endpoints
from rewards.served.judge import TEMPLATES

from .models import LlmJudgeJob
from .services.llm_judge import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SOLUTIONS,
    MAX_MAX_TOKENS,
    MAX_SOLUTIONS,
    resume_llm_judge_job,
    start_llm_judge_job,
)
from .services.training import JobInputError
from .views import campaign_for_work

RECENT_JOBS = 20


class LlmJudgeForm(forms.Form):
    endpoint: forms.ModelChoiceField[Endpoint] = forms.ModelChoiceField(queryset=Endpoint.objects.none(),
                                                                        empty_label=None)
    solutions = forms.IntegerField(min_value=1, max_value=MAX_SOLUTIONS, initial=DEFAULT_SOLUTIONS)
    max_tokens = forms.IntegerField(min_value=1, max_value=MAX_MAX_TOKENS, initial=DEFAULT_MAX_TOKENS)
    template = forms.ChoiceField(required=False, choices=[("", "the campaign's domain default"),
                                                          *((version, version) for version in TEMPLATES)])

    def __init__(self, *args: Any, user: Any, campaign: Campaign, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        endpoint_field = self.fields["endpoint"]
        assert isinstance(endpoint_field, forms.ModelChoiceField)
        endpoint_field.queryset = usable_endpoints(user, campaign)


def _campaign(request: HttpRequest, slug: str) -> Campaign:
    """The campaign as the dashboard finds it: the reward-model area refuses labelers as a whole (403), and a
    campaign the user may not research answers like one that does not exist (404)."""
    return campaign_for_work(request, slug)[1]


@login_required
@require_http_methods(["GET", "POST"])
def llm_judge_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The form (GET) and its start (POST); a refused start is the form again with its errors (400)."""
    campaign = _campaign(request, slug)
    may_start = can_start_machine_labeling(request.user, campaign)
    form = LlmJudgeForm(request.POST or None, user=request.user, campaign=campaign)
    if request.method == "POST":
        if not may_start:
            raise PermissionDenied("only staff and the campaign's admins start machine labeling jobs")
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = start_llm_judge_job(campaign=campaign, endpoint=data["endpoint"], user=request.user,
                                          limit=data["solutions"], max_tokens=data["max_tokens"],
                                          template_version=data["template"])
            except JobInputError as error:
                form.add_error(None, str(error))
            else:
                return redirect(job.get_absolute_url())
    jobs = LlmJudgeJob.objects.filter(campaign=campaign).select_related("endpoint")[:RECENT_JOBS]
    return render(request, "jobs/llm_judge_start.html",
                  {"campaign": campaign, "form": form, "jobs": jobs, "may_start": may_start},
                  status=400 if form.errors else 200)


@login_required
@require_POST
def llm_judge_resume(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    campaign = _campaign(request, slug)
    job = get_object_or_404(LlmJudgeJob.objects.select_related("campaign", "endpoint"), pk=pk, campaign=campaign)
    if not can_start_machine_labeling(request.user, campaign):
        raise PermissionDenied("only staff and the campaign's admins resume machine labeling jobs")
    try:
        resume_llm_judge_job(job, user=request.user)
    except JobInputError as error:
        return HttpResponse(str(error), status=409, content_type="text/plain")
    return redirect(job.get_absolute_url())

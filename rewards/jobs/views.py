"""Pages of reward-model work: jobs (start, live progress, cancel), models, the PRM-vs-ORM dashboard.

Thin: access rules are in ``services.access``, every other rule in ``services``; pages read through
``selectors``. Access: staff, and the active admins/researchers of a campaign; everyone else gets 404
for a campaign's objects (their existence is not revealed) and 403 for the area as a whole.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import Campaign
from rewards.active import STRATEGIES
from steplab import jsonlimits

from . import selectors
from .forms import TrainingJobForm
from .models import TrainingJob
from .services.access import accessible_campaigns, can_access, has_any_access
from .services.generations import can_start_generation, start_generation
from .services.sampling import start_sampling_job
from .services.training import JobInputError, TrainingRequest, backbones, request_cancel, start_training_job

FIGURES = ("best-of-n", "step-metrics", "data-efficiency", "history", "generations")


def _area(request: HttpRequest) -> Any:
    if not has_any_access(request.user):
        raise PermissionDenied("reward models are for campaign admins, researchers and staff")
    return accessible_campaigns(request.user)


def _job(request: HttpRequest, pk: int) -> TrainingJob:
    job = get_object_or_404(TrainingJob.objects.select_related("dataset_version", "campaign", "started_by"), pk=pk)
    if not can_access(request.user, job.campaign):
        raise Http404("no such job")
    return job


@login_required
def index(request: HttpRequest) -> HttpResponse:
    campaigns = _area(request)
    staff = request.user.is_staff
    return render(request, "jobs/index.html", {
        "jobs": selectors.training_jobs(campaigns, staff=staff)[:100],
        "models": selectors.reward_models(campaigns, staff=staff)[:100],
        "campaigns": campaigns.order_by("slug"),
    })


@login_required
@require_http_methods(["GET", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    campaigns = _area(request)
    form = TrainingJobForm(request.POST or None, versions=selectors.ready_versions(campaigns), backbones=backbones())
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = start_training_job(TrainingRequest(kind=data["kind"], dataset_version=data["dataset_version"],
                                                     base_model=data["base_model"], backend=data["backend"],
                                                     hyper=form.hyper()), user=request.user)
        except JobInputError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            return redirect("jobs:job", pk=job.pk)
    return render(request, "jobs/job_new.html", {"form": form}, status=400 if form.errors else 200)


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "jobs/job_detail.html", {"job": _job(request, pk)})


@login_required
def job_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The htmx-polled part of the job page (it stops polling once the job has ended)."""
    return render(request, "jobs/_job_progress.html", {"job": _job(request, pk)})


@login_required
@require_POST
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk)
    request_cancel(job)
    if request.htmx:
        return render(request, "jobs/_job_progress.html", {"job": job})
    return redirect("jobs:job", pk=job.pk)


def _dashboard_scope(request: HttpRequest, slug: str | None) -> tuple[Any, Campaign | None]:
    campaigns = _area(request)
    if slug is None:
        return campaigns, None
    campaign = get_object_or_404(Campaign, slug=slug)
    if not can_access(request.user, campaign):
        raise Http404("no such campaign")
    return campaigns, campaign


@login_required
def dashboard(request: HttpRequest, slug: str | None = None, *, generation_error: JobInputError | None = None,
              generation_form: dict[str, str] | None = None, sampling_error: JobInputError | None = None,
              sampling_form: dict[str, str] | None = None) -> HttpResponse:
    campaigns, campaign = _dashboard_scope(request, slug)
    status = 400 if generation_error or sampling_error else 200
    data = selectors.dashboard(campaigns, campaign)
    return render(request, "jobs/dashboard.html", {
        "campaign": campaign, "data": data, "campaigns": campaigns.order_by("slug"),
        "generation_error": generation_error,
        "bon_rows": data["figures"]["best-of-n"], "step_rows": data["figures"]["step-metrics"],
        "eff_rows": data["figures"]["data-efficiency"], "hist_rows": data["figures"]["history"],
        "chart_data": {"figures": data["figures"], "runs": data["runs"]},
        "gen_rows": data["figures"]["generations"],
        "can_start_generation": campaign is not None and can_start_generation(request.user, campaign),
        "strategies": sorted(STRATEGIES), "generation_form": generation_form or {},
        "sampling_jobs": selectors.sampling_jobs(campaign) if campaign is not None else [],
        "sampling_error": sampling_error, "sampling_form": sampling_form or {},
    }, status=status)


@login_required
@require_POST
def generation_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "start next generation" button (staff and campaign admins)."""
    _, campaign = _dashboard_scope(request, slug)
    assert campaign is not None
    if not can_start_generation(request.user, campaign):
        raise PermissionDenied("only staff and the campaign's admins start generations")
    form = {key: request.POST.get(key, "").strip() for key in ("strategy", "batch_size", "config")}
    try:
        try:
            batch_size = int(form["batch_size"])
        except ValueError:
            raise JobInputError("batch_size", f"must be an integer >= 1, got {form['batch_size']!r}") from None
        try:
            config = jsonlimits.loads(form["config"]) if form["config"] else {}
        except json.JSONDecodeError as exc:
            raise JobInputError("config", f"is not valid JSON ({exc.msg})") from None
        except jsonlimits.JSONTooDeep as exc:
            raise JobInputError("config", f"is not usable: {exc}") from None
        start_generation(campaign, strategy=form["strategy"], batch_size=batch_size, config=config,
                         user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, generation_error=exc, generation_form=form)
    return redirect("jobs:campaign_dashboard", slug=slug)


@login_required
@require_POST
def sampling_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "sample candidates" form: N solutions per campaign problem from a local LM."""
    _, campaign = _dashboard_scope(request, slug)
    assert campaign is not None
    if not can_start_generation(request.user, campaign):
        raise PermissionDenied("only staff and the campaign's admins start sampling jobs")
    form = {key: request.POST.get(key, "").strip() for key in ("n", "temperature", "max_new_tokens", "config")}
    try:
        try:
            config = jsonlimits.loads(form["config"]) if form["config"] else {}
        except json.JSONDecodeError as exc:
            raise JobInputError("config", f"is not valid JSON ({exc.msg})") from None
        except jsonlimits.JSONTooDeep as exc:
            raise JobInputError("config", f"is not usable: {exc}") from None
        if not isinstance(config, dict):
            raise JobInputError("config", f"must be a JSON object, got {type(config).__name__}")
        for key, parse in (("n", int), ("temperature", float), ("max_new_tokens", int)):
            if form[key]:
                try:
                    config[key] = parse(form[key])
                except ValueError:
                    raise JobInputError(key, f"must be a number, got {form[key]!r}") from None
        start_sampling_job(campaign, config, user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, sampling_error=exc, sampling_form=form)
    return redirect("jobs:campaign_dashboard", slug=slug)


@login_required
def figure(request: HttpRequest, name: str, fmt: str, slug: str | None = None) -> HttpResponse:
    """Every figure on the dashboard as CSV or JSON (the same rows the charts are drawn from)."""
    if name not in FIGURES or fmt not in ("csv", "json"):
        raise Http404("no such figure")
    campaigns, campaign = _dashboard_scope(request, slug)
    data = selectors.dashboard(campaigns, campaign)
    rows = data["figures"][name]
    filename = f"{campaign.slug if campaign else 'all'}-{name}.{fmt}"
    if fmt == "json":
        response: HttpResponse = JsonResponse({"figure": name, "rows": rows, "runs": data["runs"]},
                                              json_dumps_params={"indent": 1})
    else:
        buffer = io.StringIO()
        columns = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()})
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response

"""Pages of reward-model work: jobs (start, live progress, cancel), models, the PRM-vs-ORM dashboard.

Thin: access rules are in ``annotate.permissions``, every other rule in ``services``; pages read through
``selectors``. Access: staff, and the active admins/researchers of a campaign; everyone else gets 404
for a campaign's objects (their existence is not revealed) and 403 for the area as a whole.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotate.models import Campaign
from annotate.permissions import (
    Predicate,
    can_research,
    can_research_any,
    can_start_labeling_round,
    can_start_machine_labeling,
    can_start_sampling,
    is_staff,
    research_campaigns,
)
from annotate.services.importing import ImportFailed
from rewards.active import STRATEGIES
from steplab.http import AppRequest
from steplab.redirects import safe_next

from . import selectors
from .contracts import FIGURES
from .forms import (
    CompareForm,
    EvaluateForm,
    LabelingRoundForm,
    MachineLabelsForm,
    PoolUploadForm,
    SamplingForm,
    ScoreForm,
    StartForm,
    TrainingJobForm,
)
from .kinds import registry
from .models import ComparisonRun, PoolPurpose, TrainingJob
from .services.comparisons import request_cancel_comparison, snapshot_labels, start_comparison
from .services.evaluation import evaluate_scorings
from .services.labeling_rounds import sample_for_labeling_round, start_labeling_round
from .services.machine_labeling import start_machine_labeling_job
from .services.pools import import_uploaded_pool
from .services.sampling import start_sampling_job
from .services.scoring import start_scoring_jobs
from .services.training import JobInputError, TrainingRequest, backbones, request_cancel, start_training_job

#: the dashboard's start forms, by the name the page shows each under
START_FORMS: dict[str, type[StartForm]] = {
    "compare": CompareForm, "score": ScoreForm, "evaluate": EvaluateForm, "generation": LabelingRoundForm,
    "sampling": SamplingForm, "machine_labels": MachineLabelsForm}

def _area(request: HttpRequest) -> Any:
    if not can_research_any(request.user):
        raise PermissionDenied("reward models are for campaign admins, researchers and staff")
    return research_campaigns(request.user)


def _job(request: HttpRequest, pk: int) -> TrainingJob:
    job = get_object_or_404(TrainingJob.objects.select_related("dataset_version", "campaign", "started_by"), pk=pk)
    if not can_research(request.user, job.campaign):
        raise Http404("no such job")
    return job


@login_required
def index(request: HttpRequest) -> HttpResponse:
    campaigns = _area(request)
    staff = is_staff(request.user)
    return render(request, "jobs/index.html", {
        "jobs": selectors.training_jobs(campaigns, staff=staff)[:100],
        "models": selectors.reward_model_rows(campaigns, staff=staff),
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
    job = _job(request, pk)
    return render(request, "jobs/job_detail.html", {"job": job, "report": selectors.training_report(job),
                                                    "judged": selectors.judged_beside_baselines(job)})


@login_required
def job_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The htmx-polled part of the job page (it stops polling once the job has ended)."""
    job = _job(request, pk)
    return render(request, "jobs/_job_progress.html", {"job": job, "report": selectors.training_report(job)})


@login_required
@require_POST
def job_cancel(request: AppRequest, pk: int) -> HttpResponse:
    job = _job(request, pk)
    request_cancel(job)
    if request.htmx:
        return render(request, "jobs/_job_progress.html", {"job": job, "report": selectors.training_report(job)})
    return redirect("jobs:job", pk=job.pk)


def _dashboard_scope(request: HttpRequest, slug: str | None) -> tuple[Any, Campaign | None]:
    campaigns = _area(request)
    if slug is None:
        return campaigns, None
    campaign = get_object_or_404(Campaign, slug=slug)
    if not can_research(request.user, campaign):
        raise Http404("no such campaign")
    return campaigns, campaign


def _render_dashboard(request: HttpRequest, campaigns: Any, campaign: Campaign | None,
                      failed: StartForm | None = None, name: str = "") -> HttpResponse:
    """The PRM-vs-ORM page; ``failed`` is a start form posted from it, shown as ``name`` with its errors (400)."""
    page = selectors.dashboard_page(campaigns, campaign, user=request.user,
                                    forms=_start_forms(campaign, failed, name))
    return render(request, "jobs/dashboard.html", page.context(), status=400 if failed is not None else 200)


def _start_forms(campaign: Campaign | None, failed: StartForm | None, name: str) -> dict[str, StartForm]:
    """The page's start forms, unbound (their defaults), the failed one as it was posted."""
    if campaign is None:
        return {}
    unbound = {key: form(campaign=campaign) for key, form in START_FORMS.items()}
    return {**unbound, **({name: failed} if failed is not None else {})}


@login_required
def dashboard(request: HttpRequest, slug: str | None = None) -> HttpResponse:
    campaigns, campaign = _dashboard_scope(request, slug)
    return _render_dashboard(request, campaigns, campaign)


def campaign_for_work(request: HttpRequest, slug: str) -> tuple[Any, Campaign]:
    campaigns, campaign = _dashboard_scope(request, slug)
    assert campaign is not None
    return campaigns, campaign


@login_required
@require_POST
def compare_start(request: HttpRequest, slug: str) -> HttpResponse:
    """"Compare PRM and ORM": one run of snapshot → train both → score the pool → evaluate."""
    campaigns, campaign = campaign_for_work(request, slug)
    form = CompareForm(request.POST, campaign=campaign)
    if form.is_valid():
        try:
            start_comparison(campaign, max_steps=form.cleaned_data["max_steps"],
                             per_problem=form.cleaned_data["per_problem"], pool=form.cleaned_data["pool"],
                             user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#compare")
    return _render_dashboard(request, campaigns, campaign, form, "compare")


def _run(request: HttpRequest, pk: int) -> ComparisonRun:
    run = get_object_or_404(ComparisonRun.objects.select_related("campaign"), pk=pk)
    if not can_research(request.user, run.campaign):
        raise Http404("no such comparison")
    return run


@login_required
def comparison_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The polled progress of a run; once it has ended the page reloads to show its figures."""
    run = _run(request, pk)
    progress = selectors.comparison_progress(run.pk)
    response = render(request, "jobs/_comparison.html", {"comparison": progress, "campaign": run.campaign})
    if not progress.run.is_active and request.GET.get("polling"):
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def comparison_cancel(request: AppRequest, pk: int) -> HttpResponse:
    run = request_cancel_comparison(selectors.comparison_run(_run(request, pk).pk))
    if request.htmx:
        return render(request, "jobs/_comparison.html", {"comparison": selectors.comparison_progress(run.pk),
                                                         "campaign": run.campaign})
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[run.campaign.slug])}#compare")


@login_required
@require_POST
def snapshot(request: HttpRequest, slug: str) -> HttpResponse:
    """A new dataset version of the campaign's labels now (or the latest one, when nothing changed)."""
    _, campaign = campaign_for_work(request, slug)
    version, new = snapshot_labels(campaign, user=request.user)
    if new:
        messages.success(request, f"Dataset version {version} made.")
    else:
        messages.info(request, f"The labels have not changed since {version}: no new version.")
    return redirect(safe_next(request, f"{reverse('jobs:campaign_dashboard', args=[slug])}#loop"))


@login_required
@require_http_methods(["GET", "POST"])
def pool_upload(request: AppRequest, slug: str) -> HttpResponse:
    """Upload a candidate pool file (JSONL): imported and graded, or every bad line listed and nothing saved."""
    _, campaign = campaign_for_work(request, slug)
    form = PoolUploadForm(request.POST or None, request.FILES or None, campaign=campaign)
    error, report = None, None
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                pool, report = import_uploaded_pool(data["file"], campaign=campaign, name=data["name"],
                                                    purpose=data["purpose"], split_rule=data["split_rule"],
                                                    user=request.user)
            except ImportFailed as exc:
                error, report = str(exc), exc.report
            except ValueError as exc:
                error = str(exc)
            else:
                correct = report.created.get("correct", 0)
                messages.success(request, f"Pool “{pool.name}”: {pool.problem_count} problems, "
                                          f"{pool.candidate_count} candidates ({correct} correct).")
                target = f"{reverse('jobs:campaign_dashboard', args=[slug])}#loop"
                if request.htmx:  # the upload went by XHR (for its progress bar): the browser goes on from here
                    return HttpResponse(status=204, headers={"HX-Redirect": target})
                return redirect(target)
        else:
            error = "; ".join(message for _, message in form.problems)
    return render(request, "jobs/pool_upload.html", {
        "campaign": campaign, "form": form, "error": error, "report": report, "purposes": PoolPurpose.choices,
    }, status=400 if error and not request.htmx else 200)  # htmx swaps only 2xx answers into the page


@login_required
@require_POST
def score_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Score one of the campaign's pools with the chosen models (one scoring job per model)."""
    campaigns, campaign = campaign_for_work(request, slug)
    form = ScoreForm(request.POST, campaign=campaign)
    if form.is_valid():
        pool, models = form.cleaned_data["pool"], form.cleaned_data["models"]
        try:
            start_scoring_jobs(models, pool=pool, user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            messages.success(request, f"Scoring of pool “{pool.name}” started with {len(models)} model(s).")
            return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#loop")
    return _render_dashboard(request, campaigns, campaign, form, "score")


@login_required
@require_POST
def evaluate_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Best-of-N of a pool from a PRM and/or an ORM scoring of it (computed now: seconds)."""
    campaigns, campaign = campaign_for_work(request, slug)
    form = EvaluateForm(request.POST, campaign=campaign)
    if form.is_valid():
        try:
            evaluate_scorings(campaign, prm_scoring=form.cleaned_data["prm_scoring"],
                              orm_scoring=form.cleaned_data["orm_scoring"],
                              aggregation=form.cleaned_data["aggregation"], user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#best-of-n")
    return _render_dashboard(request, campaigns, campaign, form, "evaluate")


def _work(request: HttpRequest, kind: str, pk: int) -> dict[str, Any]:
    """The page's context: the job of the kind whose work page is ``kind`` (404 unless the user may see it)."""
    work = registry.pages()[kind]
    job = get_object_or_404(work.model.objects.select_related(*work.related), pk=pk)
    if not can_research(request.user, work.campaign_of(job)):
        raise Http404("no such job")
    return {"job": job, "kind": kind, "title": work.title}


@login_required
def work_detail(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """The page of a job of a kind with a work page (scoring, sampling, machine labeling…): progress, cancel,
    the failure and the log."""
    return render(request, "jobs/work_detail.html", _work(request, kind, pk))


@login_required
def work_progress(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    return render(request, "jobs/_work_progress.html", _work(request, kind, pk))


@login_required
@require_POST
def work_cancel(request: AppRequest, kind: str, pk: int) -> HttpResponse:
    context = _work(request, kind, pk)
    request_cancel(context["job"])
    context["job"].refresh_from_db()
    if request.htmx:
        return render(request, "jobs/_work_progress.html", context)
    return redirect(f"jobs:{kind}_job", pk=pk)


def _startable_campaign(request: HttpRequest, slug: str, what: str, may: Predicate) -> tuple[Any, Campaign]:
    """The dashboard's campaign, for a user who ``may`` start ``what`` in it (the predicate its service asks)."""
    campaigns, campaign = campaign_for_work(request, slug)
    if not may(request.user, campaign):
        raise PermissionDenied(f"only staff and the campaign's admins start {what}")
    return campaigns, campaign


@login_required
@require_http_methods(["GET", "POST"])
def labeling_round_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "start the next labeling round" form (staff and campaign admins); a GET (the address as
    docs/labeling.md gives it) answers the same form on a page of its own, which POSTs here."""
    campaigns, campaign = _startable_campaign(request, slug, "generations", can_start_labeling_round)
    if request.method == "GET":
        return render(request, "jobs/labeling_round_start.html", {
            "campaign": campaign, "strategies": sorted(STRATEGIES), "generation": LabelingRoundForm(campaign=campaign),
            "labeling_pool": selectors.labeling_pool(campaign)})
    form = LabelingRoundForm(request.POST, campaign=campaign)
    if form.is_valid():
        data = form.cleaned_data
        try:
            if data["endpoint"] is not None:
                sample_for_labeling_round(campaign, endpoint=data["endpoint"], strategy=data["strategy"],
                                          batch_size=data["batch_size"], config=data["config"],
                                          sampling={"n": data["samples"] or 4}, user=request.user)
            else:
                start_labeling_round(campaign, strategy=data["strategy"], batch_size=data["batch_size"],
                                     config=data["config"], user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            return redirect("jobs:campaign_dashboard", slug=slug)
    return _render_dashboard(request, campaigns, campaign, form, "generation")


@login_required
@require_POST
def sampling_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "sample candidates" form: N solutions per campaign problem from a local LM."""
    campaigns, campaign = _startable_campaign(request, slug, "sampling jobs", can_start_sampling)
    form = SamplingForm(request.POST, campaign=campaign)
    if form.is_valid():
        try:
            start_sampling_job(campaign, config=form.settings(), endpoint=form.cleaned_data["endpoint"],
                               user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            return redirect("jobs:campaign_dashboard", slug=slug)
    return _render_dashboard(request, campaigns, campaign, form, "sampling")


@login_required
@require_POST
def machine_labels_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "machine step labels" form: Monte-Carlo rollouts or a PRM's scores for chosen solutions."""
    campaigns, campaign = _startable_campaign(request, slug, "machine labeling jobs", can_start_machine_labeling)
    form = MachineLabelsForm(request.POST, campaign=campaign)
    if form.is_valid():
        data = form.cleaned_data
        try:
            start_machine_labeling_job(campaign=campaign, method=data["method"], limit=data["solutions"],
                                       reward_model=data["reward_model"], config=form.settings(),
                                       endpoint=data["endpoint"], user=request.user)
        except JobInputError as exc:
            form.refuse(exc)
        else:
            return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#machine-labels")
    return _render_dashboard(request, campaigns, campaign, form, "machine_labels")


@login_required
def figure(request: HttpRequest, name: str, fmt: str, slug: str | None = None) -> HttpResponse:
    """Every figure on the dashboard as CSV or JSON (the same rows the charts are drawn from)."""
    if name not in FIGURES or fmt not in ("csv", "json"):
        raise Http404("no such figure")
    campaigns, campaign = _dashboard_scope(request, slug)
    data = selectors.dashboard(campaigns, campaign)
    rows = data.figures[name]
    filename = f"{campaign.slug if campaign else 'all'}-{name}.{fmt}"
    if fmt == "json":
        response: HttpResponse = JsonResponse({"figure": name, "rows": rows, "runs": data.runs},
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

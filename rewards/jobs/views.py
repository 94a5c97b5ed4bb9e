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
    can_label,
    can_manage,
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
from steplab import jsonlimits
from steplab.http import AppRequest
from steplab.redirects import safe_next

from . import selectors
from .forms import TrainingJobForm
from .kinds import registry
from .models import (
    ComparisonRun,
    LabelingMethod,
    PoolPurpose,
    TrainingJob,
)
from .services.comparisons import (
    DEFAULT_MAX_STEPS,
    DEFAULT_PER_PROBLEM,
    comparison_pools,
    request_cancel_comparison,
    snapshot_labels,
    start_comparison,
)
from .services.evaluation import AGGREGATIONS, evaluate_scorings
from .services.labeling_rounds import start_labeling_round
from .services.machine_labeling import missing_reward_model, start_machine_labeling_job
from .services.pools import import_uploaded_pool
from .services.sampling import start_sampling_job
from .services.scoring import start_scoring_job
from .services.training import JobInputError, TrainingRequest, backbones, request_cancel, start_training_job

FIGURES = ("best-of-n", "per-domain", "step-metrics", "data-efficiency", "history", "generations")


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
        "models": [(model, selectors.trained_on_words(model))
                   for model in selectors.reward_models(campaigns, staff=staff)[:100]],
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
    return render(request, "jobs/job_detail.html", {"job": job, "judged": selectors.judged_beside_baselines(job)})


@login_required
def job_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The htmx-polled part of the job page (it stops polling once the job has ended)."""
    return render(request, "jobs/_job_progress.html", {"job": _job(request, pk)})


@login_required
@require_POST
def job_cancel(request: AppRequest, pk: int) -> HttpResponse:
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
    if not can_research(request.user, campaign):
        raise Http404("no such campaign")
    return campaigns, campaign


@login_required
def dashboard(request: HttpRequest, slug: str | None = None, *, errors: dict[str, JobInputError] | None = None,
              forms: dict[str, dict[str, str]] | None = None) -> HttpResponse:
    """The PRM-vs-ORM page; a form posted from it that failed comes back here with its error (400)."""
    campaigns, campaign = _dashboard_scope(request, slug)
    errors, forms = errors or {}, forms or {}
    data = selectors.dashboard(campaigns, campaign)
    loop = selectors.loop_state(campaign) if campaign is not None else {}
    offers = {"can_label": False, "can_manage": False}
    if campaign is not None and not loop["labeled"]:  # only there does the page offer labeling or inviting
        offers = {"can_label": can_label(request.user, campaign), "can_manage": can_manage(request.user, campaign)}
    return render(request, "jobs/dashboard.html", {
        "campaign": campaign, "data": data, "campaigns": campaigns.order_by("slug"),
        "bon_rows": data["figures"]["best-of-n"], "domain_rows": data["figures"]["per-domain"],
        "step_rows": data["figures"]["step-metrics"],
        "eff_rows": data["figures"]["data-efficiency"], "hist_rows": data["figures"]["history"],
        "chart_data": {"figures": data["figures"], "runs": data["runs"]},
        "gen_rows": data["figures"]["generations"],
        "can_start_labeling_round": campaign is not None and can_start_labeling_round(request.user, campaign),
        **offers,
        "strategies": sorted(STRATEGIES), "aggregations": AGGREGATIONS, "purposes": PoolPurpose.choices,
        "sampling_jobs": selectors.sampling_jobs(campaign) if campaign is not None else [],
        "machine_labeling_jobs": selectors.machine_labeling_jobs(campaign) if campaign is not None else [],
        "label_sources": selectors.label_sources(campaign) if campaign is not None else [],
        "prms": selectors.campaign_prms(campaign) if campaign is not None else [],
        "loop": loop, "run": loop.get("run"), "default_max_steps": DEFAULT_MAX_STEPS,
        "default_per_problem": DEFAULT_PER_PROBLEM,
        "compare_pools": comparison_pools(campaign) if campaign is not None else [],
        "verdict": data["verdict"], "no_flag_advice": data["no_flag_advice"],
        "errors": errors, "forms": forms,
        "generation_error": errors.get("generation"), "generation_form": forms.get("generation", {}),
        "sampling_error": errors.get("sampling"), "sampling_form": forms.get("sampling", {}),
        "machine_labels_error": errors.get("machine_labels"), "machine_labels_form": forms.get("machine_labels", {}),
    }, status=400 if errors else 200)


def _campaign_for_work(request: HttpRequest, slug: str) -> Campaign:
    _, campaign = _dashboard_scope(request, slug)
    assert campaign is not None
    return campaign


def _integer(form: dict[str, str], key: str) -> int:
    try:
        return int(form[key])
    except (KeyError, ValueError):
        raise JobInputError(key, f"must be an integer, got {form.get(key, '')!r}") from None


@login_required
@require_POST
def compare_start(request: HttpRequest, slug: str) -> HttpResponse:
    """"Compare PRM and ORM": one run of snapshot → train both → score the pool → evaluate."""
    campaign = _campaign_for_work(request, slug)
    form = {"max_steps": request.POST.get("max_steps", "").strip() or str(DEFAULT_MAX_STEPS),
            "per_problem": request.POST.get("per_problem", "").strip() or str(DEFAULT_PER_PROBLEM),
            "pool": request.POST.get("pool", "").strip()}
    try:
        start_comparison(campaign, max_steps=_integer(form, "max_steps"), per_problem=_integer(form, "per_problem"),
                         pool=_integer(form, "pool") if form["pool"] else None, user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"compare": exc}, forms={"compare": form})
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#compare")


def _run(request: HttpRequest, pk: int) -> ComparisonRun:
    run = get_object_or_404(ComparisonRun.objects.select_related("campaign"), pk=pk)
    if not can_research(request.user, run.campaign):
        raise Http404("no such comparison")
    return selectors.comparison_run(run.pk)


@login_required
def comparison_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The polled progress of a run; once it has ended the page reloads to show its figures."""
    run = _run(request, pk)
    response = render(request, "jobs/_comparison.html", {"run": run, "campaign": run.campaign})
    if not run.is_active and request.GET.get("polling"):
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def comparison_cancel(request: AppRequest, pk: int) -> HttpResponse:
    run = request_cancel_comparison(_run(request, pk))
    if request.htmx:
        return render(request, "jobs/_comparison.html", {"run": selectors.comparison_run(run.pk),
                                                         "campaign": run.campaign})
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[run.campaign.slug])}#compare")


@login_required
@require_POST
def snapshot(request: HttpRequest, slug: str) -> HttpResponse:
    """A new dataset version of the campaign's labels now (or the latest one, when nothing changed)."""
    campaign = _campaign_for_work(request, slug)
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
    campaign = _campaign_for_work(request, slug)
    form = {key: request.POST.get(key, "").strip() for key in ("name", "purpose", "split_rule")}
    error, report = None, None
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        try:
            if uploaded is None:
                raise ValueError("file: choose a JSONL file to upload")
            pool, report = import_uploaded_pool(uploaded, campaign=campaign, name=form["name"],
                                                purpose=form["purpose"] or PoolPurpose.EVALUATION,
                                                split_rule=form["split_rule"] or "auto", user=request.user)
        except ImportFailed as exc:
            error, report = str(exc), exc.report
        except ValueError as exc:
            error = str(exc)
        else:
            messages.success(request, f"Pool “{pool.name}”: {pool.problem_count} problems, {pool.candidate_count} "
                                      f"candidates ({report.created.get('correct', 0)} correct).")
            target = f"{reverse('jobs:campaign_dashboard', args=[slug])}#loop"
            if request.htmx:  # the upload went by XHR (for its progress bar): the browser goes on from here
                return HttpResponse(status=204, headers={"HX-Redirect": target})
            return redirect(target)
    return render(request, "jobs/pool_upload.html", {
        "campaign": campaign, "form": form, "error": error, "report": report, "purposes": PoolPurpose.choices,
    }, status=400 if error and not request.htmx else 200)  # htmx swaps only 2xx answers into the page


@login_required
@require_POST
def score_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Score one of the campaign's pools with the chosen models (one scoring job per model)."""
    campaign = _campaign_for_work(request, slug)
    form = {"pool": request.POST.get("pool", ""), "models": ",".join(request.POST.getlist("models"))}
    try:
        pool = selectors.campaign_pool(campaign, _integer(form, "pool"))
        if pool is None:
            raise JobInputError("pool", f"no candidate pool {form['pool']} in campaign {slug}")
        ids = [int(v) for v in request.POST.getlist("models") if v.isascii() and v.isdigit() and len(v) <= 18]
        models = selectors.campaign_reward_models(campaign, ids)
        if not models:
            raise JobInputError("models", "choose at least one reward model of this campaign")
        for model in models:
            start_scoring_job(model, pool=pool, user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"score": exc}, forms={"score": form})
    messages.success(request, f"Scoring of pool “{pool.name}” started with {len(models)} model(s).")
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#loop")


@login_required
@require_POST
def evaluate_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Best-of-N of a pool from a PRM and/or an ORM scoring of it (computed now: seconds)."""
    campaign = _campaign_for_work(request, slug)
    form = {key: request.POST.get(key, "").strip() for key in ("prm_scoring", "orm_scoring", "aggregation")}
    try:
        evaluate_scorings(campaign, prm_scoring=_integer(form, "prm_scoring") if form["prm_scoring"] else None,
                          orm_scoring=_integer(form, "orm_scoring") if form["orm_scoring"] else None,
                          aggregation=form["aggregation"] or "product", user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"evaluate": exc}, forms={"evaluate": form})
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#best-of-n")


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


def _startable_campaign(request: HttpRequest, slug: str, what: str, may: Predicate) -> Campaign:
    """The dashboard's campaign, for a user who ``may`` start ``what`` in it (the predicate its service asks)."""
    _, campaign = _dashboard_scope(request, slug)
    assert campaign is not None
    if not may(request.user, campaign):
        raise PermissionDenied(f"only staff and the campaign's admins start {what}")
    return campaign


def _json_config(text: str) -> Any:
    """A form's optional ``config`` field: the decoded JSON ({} when empty), or a JobInputError naming it."""
    try:
        return jsonlimits.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise JobInputError("config", f"is not valid JSON ({exc.msg})") from None
    except jsonlimits.JSONTooDeep as exc:
        raise JobInputError("config", f"is not usable: {exc}") from None


@login_required
@require_http_methods(["GET", "POST"])
def labeling_round_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "start the next labeling round" form (staff and campaign admins); a GET (the address as
    docs/labeling.md gives it) answers the same form on a page of its own, which POSTs here."""
    campaign = _startable_campaign(request, slug, "generations", can_start_labeling_round)
    if request.method == "GET":
        return render(request, "jobs/labeling_round_start.html", {
            "campaign": campaign, "strategies": sorted(STRATEGIES),
            "labeling_pool": selectors.loop_state(campaign)["labeling_pool"]})
    form = {key: request.POST.get(key, "").strip() for key in ("strategy", "batch_size", "config")}
    try:
        try:
            batch_size = int(form["batch_size"])
        except ValueError:
            raise JobInputError("batch_size", f"must be an integer >= 1, got {form['batch_size']!r}") from None
        config = _json_config(form["config"])
        start_labeling_round(campaign, strategy=form["strategy"], batch_size=batch_size, config=config,
                             user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"generation": exc}, forms={"generation": form})
    return redirect("jobs:campaign_dashboard", slug=slug)


def _form_config(form: dict[str, str], fields: tuple[tuple[str, type[int] | type[float] | type[str]], ...]
                 ) -> dict[str, Any]:
    """A start form's settings: its "More (JSON)" object, with the form's own fields (when filled) on top."""
    config = _json_config(form["config"])
    if not isinstance(config, dict):
        raise JobInputError("config", f"must be a JSON object, got {type(config).__name__}")
    for key, parse in fields:
        if form[key]:
            try:
                config[key] = parse(form[key])
            except ValueError:
                raise JobInputError(key, f"must be a number, got {form[key]!r}") from None
    return config


@login_required
@require_POST
def sampling_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "sample candidates" form: N solutions per campaign problem from a local LM."""
    campaign = _startable_campaign(request, slug, "sampling jobs", can_start_sampling)
    form = {key: request.POST.get(key, "").strip() for key in ("n", "temperature", "max_new_tokens", "config")}
    try:
        config = _form_config(form, (("n", int), ("temperature", float), ("max_new_tokens", int)))
        start_sampling_job(campaign, config=config, user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"sampling": exc}, forms={"sampling": form})
    return redirect("jobs:campaign_dashboard", slug=slug)


@login_required
@require_POST
def machine_labels_start(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard's "machine step labels" form: Monte-Carlo rollouts or a PRM's scores for chosen solutions."""
    campaign = _startable_campaign(request, slug, "machine labeling jobs", can_start_machine_labeling)
    form = {key: request.POST.get(key, "").strip()
            for key in ("method", "solutions", "reward_model", "rollouts", "strategy", "max_new_tokens", "config")}
    try:
        monte_carlo = form["method"] == LabelingMethod.MC
        config = _form_config(form, (("rollouts", int), ("max_new_tokens", int), ("strategy", str))
                              if monte_carlo else ())
        reward_model = None
        if form["method"] == LabelingMethod.PRM and form["reward_model"]:
            reward_model = selectors.reward_model(_integer(form, "reward_model"))
            if reward_model is None:
                raise JobInputError("reward_model", missing_reward_model(form["reward_model"], campaign))
        start_machine_labeling_job(campaign=campaign, method=form["method"], limit=_integer(form, "solutions"),
                                   reward_model=reward_model, config=config, user=request.user)
    except JobInputError as exc:
        return dashboard(request, slug, errors={"machine_labels": exc}, forms={"machine_labels": form})
    return redirect(f"{reverse('jobs:campaign_dashboard', args=[slug])}#machine-labels")


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

"""The campaign admin workspace under /manage/: thin views over ``annotate.services.campaigns``,
``agreement`` and ``adjudication``.

Only staff and the campaign's active admin members get in; everyone else signed in gets 403, and
anonymous visitors are sent to the login page.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from stepcore import steprules
from stepcore.graders import GraderConfigError, get_grader
from steplab.http import AppRequest
from steplab.redirects import safe_next

from . import forms_manage as forms
from . import permissions
from .models import (
    RESPLIT_FROM,
    RESPLIT_INTO,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMetrics,
    ImportJob,
    Membership,
    Solution,
)
from .rendering import math_source, render_markdown
from .scales import Scale, campaign_scale
from .selectors import solutions_with_split_reports
from .services import accounts, adjudication, agreement, campaigns, resplit
from .services.campaigns import CampaignAdminError

View = Callable[..., HttpResponse]


def manager_required(view: View) -> View:
    """Any page of the workspace not tied to one campaign: staff or an admin of some campaign."""
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not permissions.can_manage_any(request.user):
            raise PermissionDenied("only staff and campaign admins can manage campaigns")
        return view(request, *args, **kwargs)
    return wrapper


def campaign_admin_required(view: View) -> View:
    """A campaign's page: staff or that campaign's admin; the campaign is passed in place of its slug. A campaign the
    user is no member of is a 404, as one that does not exist: its slug tells an outsider nothing."""
    @wraps(view)
    def wrapper(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        campaign = get_object_or_404(permissions.member_campaigns(request.user), slug=slug)
        if not permissions.can_manage(request.user, campaign):
            raise PermissionDenied(f"you are not an admin of campaign {slug}")
        return view(request, campaign, *args, **kwargs)
    return wrapper


def _review_choices(scale: Scale) -> list[tuple[int, str]]:
    """The resolved-label choices of the review form: PRM800K's as they were, another scale's values by label."""
    if scale.is_pm1:
        return [(-1, "−1"), (0, "0"), (1, "+1")]
    return [(v.value, v.label) for v in scale.values]


def _form_errors(form: Any) -> str:
    return "; ".join(f"{error}" for errors in form.errors.values() for error in errors)


# --- campaigns ------------------------------------------------------------------------------------------------

@manager_required
def index(request: HttpRequest) -> HttpResponse:
    rows = permissions.managed_campaigns(request.user).annotate(
        n_solutions=Count("solutions", distinct=True),
        n_members=Count("memberships", filter=Q(memberships__is_active=True), distinct=True)).order_by(
        "-is_active", "name")
    return render(request, "annotate/manage/index.html", {"campaigns": rows})


@manager_required
@require_http_methods(["GET", "POST"])
def campaign_new(request: AppRequest) -> HttpResponse:
    form = forms.CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            campaign = campaigns.create_campaign(creator=request.user, **form.cleaned_data)
        except CampaignAdminError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Campaign {campaign.slug} created.")
            return redirect("manage:dashboard", slug=campaign.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/manage/campaign_form.html", {"form": form, "campaign": None}, status=status)


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def campaign_edit(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    form = forms.CampaignForm(request.POST or None, instance=campaign)
    if request.method == "POST" and form.is_valid():
        try:
            campaigns.update_campaign(campaign=campaign, **form.cleaned_data)
        except CampaignAdminError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, "Settings saved.")
            return redirect("manage:dashboard", slug=campaign.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/manage/campaign_form.html", {
        "form": form, "campaign": campaign, "instructions_html": render_markdown(campaign.instructions)},
        status=status)


@campaign_admin_required
@require_POST
def campaign_archive(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    archived = request.POST.get("archived", "1") != "0"
    campaigns.set_archived(campaign, archived)
    messages.success(request, f"Campaign {'archived' if archived else 'restored'}.")
    return redirect("manage:dashboard", slug=campaign.slug)


@campaign_admin_required
def dashboard(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    """Fixed number of queries whatever the size: progress aggregates plus the precomputed metrics."""
    metrics = CampaignMetrics.objects.filter(campaign=campaign).first()
    flagged = Membership.objects.filter(campaign=campaign, quality_flagged_at__isnull=False).count()
    imports = list(ImportJob.objects.filter(campaign=campaign)[:5])
    progress, progress_at = campaigns.cached_campaign_progress(campaign, fresh=request.GET.get("fresh") == "1")
    gold_rows, hidden = _gold_rows(campaign, metrics.data.get("gold_by_labeler", []) if metrics else [])
    if (refused := steprules.refusal(campaign.step_rule)) is not None:  # saved before the engine refused it
        messages.warning(request, f"This campaign's {refused}. Choose another step rule in its settings; until "
                                  "then each solutions import must name a rule of its own.")
    try:
        get_grader(campaign.grader, campaign.grader_config)
    except GraderConfigError as error:  # a pattern saved before the engine refused it
        messages.warning(request, f"This campaign's grader setting {error}. Choose another in its settings; until "
                                  "then imports cannot grade.")
    return render(request, "annotate/manage/dashboard.html", {
        "campaign": campaign, "progress": progress, "progress_at": progress_at, "metrics": metrics,
        "m": metrics.data if metrics else None, "gold_rows": gold_rows, "gold_hidden": hidden,
        "flagged": flagged, "imports": imports, "instructions_html": render_markdown(campaign.instructions),
        "recompute_since": agreement.recompute_pending_since(campaign, metrics),
    })


def _gold_rows(campaign: Campaign, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The gold table's labelers: members first, then labelers known only from imported labels (marked
    ``imported``); an imported labeler with no gold item is left out (its row would be all n=0), counted instead."""
    members = set(Membership.objects.filter(campaign=campaign).values_list("user_id", flat=True))
    shown, hidden = [], 0
    for row in rows:
        imported = row["labeler_id"] not in members
        if imported and not any(isinstance(v, dict) and v.get("items") for v in row.values()):
            hidden += 1
            continue
        shown.append({**row, "imported": imported})
    shown.sort(key=lambda row: row["imported"])
    return shown, hidden


@campaign_admin_required
@require_POST
def metrics_refresh(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    if not agreement.request_recompute(campaign):
        messages.warning(request, "The task queue is unreachable; the metrics refresh at the next scheduled run.")
    return redirect(f"{reverse('manage:dashboard', args=[campaign.slug])}#quality")


# --- members --------------------------------------------------------------------------------------------------

@campaign_admin_required
@require_http_methods(["GET", "POST"])
def members(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    if request.POST.get("form") == "account":
        return _new_account(request, campaign)
    form = forms.MemberForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                said = campaigns.add_member(campaign, form.cleaned_data["username"], form.cleaned_data["role"],
                                            invited_by=request.user)
            except CampaignAdminError as error:
                form.add_error(error.field if error.field in form.fields else None, error.message)
            else:
                messages.success(request, said)
                return redirect("manage:members", slug=campaign.slug)
        status = 400
    return render(request, "annotate/manage/members.html", {
        "campaign": campaign, "form": form, "account_form": forms.NewAccountForm(),
        "members": campaigns.member_summaries(campaign)}, status=status)


def _new_account(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    """The members page's "Create an account" form. Answered with the page itself, not a redirect: a generated
    password is shown in this one answer and stored nowhere else."""
    form = forms.NewAccountForm(request.POST)
    created = None
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = accounts.create_member_account(
                campaign, username=data["username"], role=data["role"], email=data["email"],
                password=data["password"], created_by=request.user)
        except CampaignAdminError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
    response = render(request, "annotate/manage/members.html", {
        "campaign": campaign, "form": forms.MemberForm(), "account_form": form if created is None else
        forms.NewAccountForm(), "created": created, "members": campaigns.member_summaries(campaign)},
        status=200 if created is not None else 400)
    response["Cache-Control"] = "no-store"  # it may hold a password
    return response


@campaign_admin_required
@require_POST
def member_state(request: HttpRequest, campaign: Campaign, user_id: int) -> HttpResponse:
    membership = get_object_or_404(Membership, campaign=campaign, user_id=user_id)
    form = forms.MemberStateForm(request.POST)
    if not form.is_valid():
        return HttpResponse(_form_errors(form), status=400, content_type="text/plain")
    action = form.cleaned_data["action"]
    campaigns.set_member_state(membership, **{
        "deactivate": {"is_active": False}, "activate": {"is_active": True},
        "pause": {"is_paused": True}, "unpause": {"is_paused": False}}[action])
    messages.success(request, f"{membership.user.username}: {action}d.")
    return redirect(safe_next(request, reverse("manage:members", args=[campaign.slug])))


@campaign_admin_required
def labeler(request: HttpRequest, campaign: Campaign, user_id: int) -> HttpResponse:
    membership = get_object_or_404(Membership.objects.select_related("user"), campaign=campaign, user_id=user_id)
    recent = (Assignment.objects.filter(solution__campaign=campaign, labeler_id=user_id)
              .select_related("solution").order_by("-finished_at", "-id")[:50])
    metrics = CampaignMetrics.objects.filter(campaign=campaign).first()
    gold = over_time = None
    if metrics:
        gold = next((row for row in metrics.data.get("gold_by_labeler", []) if row["labeler_id"] == user_id), None)
        over_time = metrics.data.get("quality_over_time", {}).get(str(user_id), [])
    counts = dict(Assignment.objects.filter(solution__campaign=campaign, labeler_id=user_id)
                  .values_list("status").annotate(n=Count("id")).order_by())
    return render(request, "annotate/manage/labeler.html", {
        "campaign": campaign, "membership": membership, "recent": recent, "gold": gold, "over_time": over_time,
        "metrics": metrics, "counts": counts, "submitted": counts.get(AssignmentStatus.SUBMITTED, 0),
    })


# --- imports --------------------------------------------------------------------------------------------------

@campaign_admin_required
@require_http_methods(["GET", "POST"])
def imports(request: AppRequest, campaign: Campaign) -> HttpResponse:
    form = forms.UploadForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = campaigns.create_import_job(
                    campaign, kind=data["kind"], upload=data["file"], user=request.user,
                    skip_invalid=data["skip_invalid"], split_rule=data["split_rule"], generation=data["generation"],
                    label_source=data["label_source"])
            except CampaignAdminError as error:
                form.add_error(error.field if error.field in form.fields else None, error.message)
            else:
                return redirect("manage:import", slug=campaign.slug, job_id=job.pk)
        status = 400
    jobs = ImportJob.objects.filter(campaign=campaign).select_related("created_by")[:50]
    return render(request, "annotate/manage/imports.html", {"campaign": campaign, "form": form, "jobs": jobs},
                  status=status)


@campaign_admin_required
def import_job(request: HttpRequest, campaign: Campaign, job_id: int) -> HttpResponse:
    job = get_object_or_404(ImportJob, campaign=campaign, pk=job_id)
    return render(request, "annotate/manage/import_job.html", {"campaign": campaign, "job": job})


@campaign_admin_required
def import_progress(request: AppRequest, campaign: Campaign, job_id: int) -> HttpResponse:
    """The htmx-polled progress bar; once the job is finished it tells htmx to show the whole result."""
    job = get_object_or_404(ImportJob, campaign=campaign, pk=job_id)
    response = render(request, "annotate/manage/_import_progress.html", {"campaign": campaign, "job": job})
    if job.is_finished and request.htmx:
        response["HX-Refresh"] = "true"
    return response


# --- adjudication ---------------------------------------------------------------------------------------------

@campaign_admin_required
def adjudication_list(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    return render(request, "annotate/manage/adjudication_list.html", {
        "campaign": campaign, "items": adjudication.disagreements(campaign)})


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def adjudication_review(request: AppRequest, campaign: Campaign, solution_id: int) -> HttpResponse:
    solution = get_object_or_404(Solution.objects.select_related("problem", "campaign"), campaign=campaign,
                                 pk=solution_id)
    status, errors = 200, []
    if request.method == "POST":
        values: dict[int, int | None] = {}
        notes: dict[int, str] = {}
        for key in request.POST:
            if not key.startswith("step-"):
                continue
            raw = request.POST.get(key) or ""
            try:
                index = int(key.removeprefix("step-"))
                values[index] = None if raw == "" else int(raw)
            except ValueError:
                errors.append(f"{key}: rating must be a value of the campaign's scale or empty, got {raw!r}")
                continue
            notes[index] = request.POST.get(f"note-{index}", "")
        if not errors:
            try:
                count = adjudication.set_resolved_labels(solution, values, request.user, notes)
            except CampaignAdminError as error:
                errors.append(str(error))
            else:
                messages.success(request, f"Saved: {count} step(s) carry a resolved label.")
                return redirect("manage:review", slug=campaign.slug, solution_id=solution.pk)
        status = 400
    result = adjudication.review(solution)
    for row in result.rows:
        row.texts = [math_source(text) for text in row.texts]
    return render(request, "annotate/manage/review.html", {
        "campaign": campaign, "review": result, "solution": solution, "errors": errors,
        "problem_text": math_source(solution.problem.text),
        "choices": _review_choices(campaign_scale(campaign)),
    }, status=status)



# --- step boundaries ------------------------------------------------------------------------------------------

@campaign_admin_required
def split_reports(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    """Solutions labelers reported as badly split, each with a link to re-split it."""
    return render(request, "annotate/manage/split_reports.html", {
        "campaign": campaign, "groups": solutions_with_split_reports(campaign.pk)})


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def resplit_view(request: AppRequest, campaign: Campaign, solution_id: int) -> HttpResponse:
    """Edit a solution's steps: in place before any rating, else as a new solution (the service decides)."""
    solution = get_object_or_404(Solution.objects.select_related("problem"), campaign=campaign, pk=solution_id)
    steps = resplit.current_steps(solution)
    form = forms.ResplitForm(request.POST or None, initial={"steps": "\n\n".join(steps)})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                outcome = resplit.resplit_solution(solution_id=solution.pk, user=request.user,
                                                   steps=resplit.steps_from_text(form.cleaned_data["steps"]))
            except resplit.ResplitError as error:
                form.add_error("steps" if error.field == "steps" else None, str(error))
            else:
                if outcome.in_place:
                    messages.success(request, f"Solution {solution.pk} now has {len(resplit.current_steps(solution))}"
                                              f" steps (no ratings yet: changed in place; {outcome.released_leases} "
                                              f"open lease(s) released).")
                else:
                    messages.success(request, f"Solution {solution.pk} had ratings: it keeps them, and the new "
                                              f"steps are solution {outcome.solution.pk}, which labelers get "
                                              f"from now on.")
                return redirect("manage:resplit", slug=campaign.slug, solution_id=outcome.solution.pk)
        status = 400
    return render(request, "annotate/manage/resplit.html", {
        "campaign": campaign, "solution": solution, "form": form, "steps": [math_source(t) for t in steps],
        "problem_text": math_source(solution.problem.text), "has_ratings": resplit.has_ratings(solution),
        "resplit_into": solution.provenance.get(RESPLIT_INTO),
        "resplit_from": solution.provenance.get(RESPLIT_FROM),
    }, status=status)

"""The campaign admin workspace under /manage/: thin views over ``annotate.services.campaigns``,
``agreement`` and ``adjudication``.

Only staff and the campaign's active admin members get in; everyone else signed in gets 403, and
anonymous visitors are sent to the login page.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from stepcore import steprules
from stepcore.graders import GraderConfigError, get_grader
from steplab.http import AppRequest
from steplab.redirects import safe_next

from . import forms_manage as forms
from . import permissions, selectors
from .models import (
    RESPLIT_FROM,
    RESPLIT_INTO,
    Campaign,
)
from .rendering import math_source, render_markdown
from .scales import Scale, campaign_scale
from .services import accounts, adjudication, agreement, campaigns, resplit
from .services.campaigns import CampaignAdminError

View = Callable[..., HttpResponse]
Found = TypeVar("Found")


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


def _found(row: Found | None, what: str) -> Found:
    """A row a selector read for the campaign, or a 404 (another campaign's row is as missing as a made-up id)."""
    if row is None:
        raise Http404(what)
    return row


def _form_errors(form: Any) -> str:
    return "; ".join(f"{error}" for errors in form.errors.values() for error in errors)


# --- campaigns ------------------------------------------------------------------------------------------------

@manager_required
def index(request: HttpRequest) -> HttpResponse:
    rows = selectors.managed_campaign_rows(request.user)
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
    overview = selectors.campaign_overview(campaign)
    progress, progress_at = campaigns.cached_campaign_progress(campaign, fresh=request.GET.get("fresh") == "1")
    if (refused := steprules.refusal(campaign.step_rule)) is not None:  # saved before the engine refused it
        messages.warning(request, f"This campaign's {refused}. Choose another step rule in its settings; until "
                                  "then each solutions import must name a rule of its own.")
    try:
        get_grader(campaign.grader, campaign.grader_config)
    except GraderConfigError as error:  # a pattern saved before the engine refused it
        messages.warning(request, f"This campaign's grader setting {error}. Choose another in its settings; until "
                                  "then imports cannot grade.")
    return render(request, "annotate/manage/dashboard.html", {
        "campaign": campaign, "progress": progress, "progress_at": progress_at, "metrics": overview.metrics,
        "m": overview.data, "gold_rows": overview.gold_rows, "gold_hidden": overview.gold_hidden,
        "flagged": overview.flagged, "imports": overview.imports,
        "instructions_html": render_markdown(campaign.instructions),
        "recompute_since": agreement.recompute_pending_since(campaign, overview.metrics),
    })


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
    membership = _found(selectors.campaign_member(campaign, user_id), "no such member")
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
    record = selectors.labeler_record(campaign, user_id)
    if record is None:
        raise Http404("no such member")
    return render(request, "annotate/manage/labeler.html", {
        "campaign": campaign, "membership": record.membership, "recent": record.recent, "gold": record.gold,
        "over_time": record.over_time, "metrics": record.metrics, "counts": record.counts,
        "submitted": record.submitted,
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
    return render(request, "annotate/manage/imports.html", {"campaign": campaign, "form": form,
                                                           "jobs": selectors.import_jobs(campaign)},
                  status=status)


@campaign_admin_required
def import_job(request: HttpRequest, campaign: Campaign, job_id: int) -> HttpResponse:
    job = _found(selectors.import_job(campaign, job_id), "no such import")
    return render(request, "annotate/manage/import_job.html", {"campaign": campaign, "job": job})


@campaign_admin_required
def import_progress(request: AppRequest, campaign: Campaign, job_id: int) -> HttpResponse:
    """The htmx-polled progress bar; once the job is finished it tells htmx to show the whole result."""
    job = _found(selectors.import_job(campaign, job_id), "no such import")
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
    solution = _found(selectors.campaign_solution(campaign, solution_id), "no such solution")
    status, errors = 200, []
    if request.method == "POST":
        form = forms.ReviewForm(request.POST)
        if form.is_valid():
            try:
                count = adjudication.set_resolved_labels(solution, form.cleaned_data["values"], request.user,
                                                         form.cleaned_data["notes"])
            except CampaignAdminError as error:
                errors.append(str(error))
            else:
                messages.success(request, f"Saved: {count} step(s) carry a resolved label.")
                return redirect("manage:review", slug=campaign.slug, solution_id=solution.pk)
        errors += [str(error) for error in form.non_field_errors()]
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
        "campaign": campaign, "groups": selectors.solutions_with_split_reports(campaign.pk)})


@campaign_admin_required
@require_http_methods(["GET", "POST"])
def resplit_view(request: AppRequest, campaign: Campaign, solution_id: int) -> HttpResponse:
    """Edit a solution's steps: in place before any rating, else as a new solution (the service decides)."""
    solution = _found(selectors.campaign_solution(campaign, solution_id), "no such solution")
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

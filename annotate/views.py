"""Labeler-facing pages. Thin: every rule lives in ``annotate.services``.

The workspace is server-rendered; htmx posts each rating and swaps back the one step row it changed
(plus the next row, the progress counter and the "next" control out of band). Errors on htmx requests come
back as a message retargeted to ``#alerts`` with the status that says what happened (400 bad input,
403 not allowed, 409 lease gone), so nothing fails silently.
"""
from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from stepcore.graders import graded_by_people
from steplab.http import AppRequest

from . import forms, permissions
from .models import Assignment, AssignmentStatus, Invitation, MachineLabel, Problem
from .rendering import answer_source, math_source, render_markdown, step_source
from .scales import Scale, campaign_scale
from .services import campaigns, labeling, leases, suggestions
from .services.campaigns import CampaignAdminError
from .services.errors import LabelingError, LeaseExpired, NotAllowed
from .workspace import Progress, Workspace, continuations, load_workspace


@login_required
def home(request: HttpRequest) -> HttpResponse:
    campaigns = permissions.joined_campaigns(request.user).order_by("name")
    return render(request, "annotate/home.html", {"campaigns": campaigns})


@login_required
@require_http_methods(["GET", "POST"])
def invitations(request: AppRequest) -> HttpResponse:
    """My pending invitations, to accept (the membership starts) or decline."""
    if request.method == "POST":
        try:
            membership = campaigns.answer_invitation(user=request.user,
                                                     invitation_id=_invitation_id(request.POST.get("invitation")),
                                                     accept=request.POST.get("answer") == "accept")
        except CampaignAdminError as error:
            return HttpResponse(f"{error.field}: {error.message}", status=404, content_type="text/plain")
        if membership is not None:
            messages.success(request, f"You joined {membership.campaign.name} as {membership.role}.")
        return redirect("annotate:invitations")
    pending = Invitation.objects.filter(user=request.user).select_related("campaign", "invited_by").order_by(
        "-created_at")
    return render(request, "annotate/invitations.html", {"invitations": pending})


def _invitation_id(value: str | None) -> int:
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 18:  # "²" is a digit to isdigit
        raise CampaignAdminError("invitation", f"no invitation {value!r} for you")
    return int(value)


@require_GET
def healthz(request: AppRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


# --- View models ----------------------------------------------------------------------------------------------

RATING_BUTTONS = [(-1, "−1", "bad", "Bad: this step is wrong (1 or -)"),
                  (0, "0", "okay", "Okay: reasonable but not helpful (2 or 0)"),
                  (1, "+1", "great", "Great: correct and helpful (3 or +)")]


@dataclass(frozen=True)
class RatingButton:
    """One value of the campaign's scale as the workspace shows it (value, text, css suffix, title, key, colour)."""

    value: int
    label: str
    css: str
    title: str
    key: str = ""
    colour: str = ""

    def __iter__(self) -> Any:  # the template unpacks (value, label, css, title), as it did the tuples
        return iter((self.value, self.label, self.css, self.title))


def rating_buttons(scale: Scale) -> list[RatingButton]:
    """PRM800K's three buttons exactly as before; another scale's values with their own label, key and colour."""
    if scale.is_pm1:
        return [RatingButton(*button, key=key, colour="") for button, key in zip(RATING_BUTTONS, "123", strict=True)]
    return [RatingButton(v.value, v.label, "bad" if v.is_error else "custom", f"{v.label} ({v.key})", v.key, v.colour)
            for v in scale.values]


@dataclass
class CompletionView:
    index: int
    text: str
    rating: int | None
    flagged: bool
    rationale: str = ""
    is_error: bool = False  # the rating is an error value of the campaign's scale


@dataclass
class StepRow:
    index: int
    completions: list[CompletionView]
    state: str  # "open" (can be rated), "done" (read-only), "locked" (an earlier step comes first)
    is_current: bool
    chosen: int | None = None
    human_text: str | None = None
    can_choose: bool = False
    can_write: bool = False
    oob: bool = False
    choosable: set[int] = field(default_factory=set)
    suggestions: list[MachineLabel] = field(default_factory=list)  # the step's machine labels on screen now
    split_reported: bool = False
    is_error: bool = False  # stepwise: the step's rating is an error value of the scale (−1 on PRM800K's)
    error_category: str = ""

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def rating(self) -> int | None:
        return self.completions[0].rating if self.completions else None

    @property
    def flagged(self) -> bool:
        return bool(self.completions and self.completions[0].flagged)


def _rows(ws: Workspace, *, oob: AbstractSet[int] = frozenset()) -> list[StepRow]:
    assignment, progress = ws.assignment, ws.progress
    stepwise = assignment.solution.campaign.is_stepwise
    is_open = assignment.status == AssignmentStatus.LEASED
    scale = campaign_scale(assignment.solution.campaign)
    rows = []
    for step in ws.steps:
        completions = []
        for completion in step.completions:
            rating = ws.ratings.get((step.index, completion.index))
            completions.append(CompletionView(completion.index, step_source(completion.text),
                                              rating.rating if rating else None,
                                              bool(rating.flagged) if rating else False,
                                              rating.rationale if rating else "",
                                              rating is not None and scale.is_error(rating.rating)))
        decision = ws.decisions.get(step.index)
        state = progress.step_state(step.index, stepwise=stepwise, is_open=is_open)
        row = StepRow(index=step.index, completions=completions, state=state,
                      is_current=is_open and step.index == progress.first_open, oob=step.index in oob,
                      split_reported=step.split_reported)
        first = ws.ratings.get((step.index, 0))
        row.is_error = first is not None and scale.is_error(first.rating)
        row.error_category = first.error_category if first is not None else ""
        if ws.suggestions.get(step.index) and suggestions.visible(
                assignment.solution.campaign, rated=bool(completions) and completions[0].rating is not None):
            row.suggestions = ws.suggestions[step.index]
        if decision is not None and not stepwise:
            row.chosen, row.human_text = decision.chosen_completion, decision.human_text
        if not stepwise and state == "open":
            allowed = continuations({c.index: c.rating for c in completions}, scale)
            row.can_choose, row.choosable, row.can_write = allowed.can_choose, set(allowed.choosable), allowed.can_write
        rows.append(row)
    return rows


def _options(problem: Problem) -> list[tuple[str, str]]:
    """A multiple-choice problem's options as (letter, text), shown with the question; empty for other problems."""
    return [(chr(ord("A") + index), math_source(text)) for index, text in enumerate(problem.options or [])]


def _workspace_context(request: AppRequest, ws: Workspace, **extra: object) -> dict:
    assignment, progress = ws.assignment, ws.progress
    campaign = assignment.solution.campaign
    heartbeat_s = max(5, min(60, campaign.lease_minutes * 60 // 3))
    scale = campaign_scale(campaign)
    context = {
        "assignment": assignment, "campaign": campaign, "problem": assignment.solution.problem,
        "problem_text": math_source(assignment.solution.problem.text),
        # a multiple-choice answer is an option's letter: text, never math
        "answer": (assignment.solution.problem.answer or "") if assignment.solution.problem.options
        else answer_source(assignment.solution.problem.answer),
        "instructions_html": render_markdown(campaign.instructions),
        "rows": _rows(ws), "progress": progress, "rating_buttons": rating_buttons(scale), "scale": scale,
        "error_values": ",".join(map(str, sorted(scale.error_values))),
        "error_categories": scale.error_category_keys(campaign.error_categories),
        "problem_options": _options(assignment.solution.problem),
        "is_open": assignment.status == AssignmentStatus.LEASED,
        "is_expired": assignment.status == AssignmentStatus.EXPIRED,
        "stepwise": campaign.is_stepwise, "heartbeat_s": heartbeat_s,
        "next_ready": _next_ready(assignment, progress), "rationale_mode": campaign.step_rationale,
        "rates_outcome": graded_by_people(campaign.grader),
    }
    context.update(extra)
    return context


def _next_ready(assignment: Assignment, progress: Progress) -> bool:
    return assignment.status != AssignmentStatus.LEASED or progress.submittable


# --- Responses ------------------------------------------------------------------------------------------------

def _alert(request: AppRequest, message: str, status: int, *, assignment: Assignment | None = None) -> HttpResponse:
    """An error as the page shows it: into #alerts for htmx, as a page of its own otherwise."""
    context = {"message": message, "status": status, "assignment": assignment,
               "expired": status == 409}
    if request.htmx:
        response = render(request, "annotate/_alert.html", context, status=status)
        response["HX-Retarget"] = "#alerts"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(request, "annotate/error.html", context, status=status)


def _error_response(request: AppRequest, error: LabelingError, assignment_id: int | None = None) -> HttpResponse:
    status = 403 if isinstance(error, NotAllowed) else 409 if isinstance(error, LeaseExpired) else 400
    assignment = None
    if isinstance(error, LeaseExpired) and assignment_id is not None:
        assignment = Assignment.objects.filter(pk=assignment_id).first()
    return _alert(request, str(error), status, assignment=assignment)


def _workspace_error(request: AppRequest, assignment_id: int, message: str, status: int) -> HttpResponse:
    """A refused form POST (finish / next) re-shows the workspace with the reason; nothing saved is lost."""
    try:
        ws = load_workspace(assignment_id, request.user)
    except NotAllowed as error:
        return _alert(request, str(error), 403)
    context = _workspace_context(request, ws, error=message,
                                 error_status=status)
    return render(request, "annotate/workspace.html", context, status=status)


def _form_error(request: AppRequest, assignment_id: int, error: LabelingError) -> HttpResponse:
    if isinstance(error, NotAllowed):
        return _alert(request, str(error), 403)
    return _workspace_error(request, assignment_id, str(error), 409 if isinstance(error, LeaseExpired) else 400)


def _rows_response(request: AppRequest, ws: Workspace, step_index: int, announce: str,
                   removed: str = "") -> HttpResponse:
    """The changed row, then (out of band) the rows after it, the progress counter, the "Submit" control and
    the live-region announcement of what was saved (``removed``: ratings a −1 took out of the pass)."""
    if not request.htmx:
        return redirect("annotate:workspace", ws.assignment.pk)
    rows = _rows(ws, oob={step.index for step in ws.steps if step.index != step_index})
    scale = campaign_scale(ws.assignment.solution.campaign)
    return render(request, "annotate/_rows_update.html", {
        "rows": rows, "assignment": ws.assignment, "progress": ws.progress,
        "rating_buttons": rating_buttons(scale),
        "error_categories": scale.error_category_keys(ws.assignment.solution.campaign.error_categories),
        "stepwise": ws.assignment.solution.campaign.is_stepwise,
        "next_ready": _next_ready(ws.assignment, ws.progress), "is_open": True,
        "announce": announce, "removed": removed, "rationale_mode": ws.assignment.solution.campaign.step_rationale,
    })


# --- Pages ----------------------------------------------------------------------------------------------------

@login_required
@require_GET
def campaign_page(request: AppRequest, slug: str) -> HttpResponse:
    campaign = get_object_or_404(permissions.member_campaigns(request.user), slug=slug)  # an outsider's 404
    membership = permissions.membership_of(request.user, campaign)
    if membership is None:
        return _alert(request, "You are not a member of this campaign.", 403)
    open_assignment = Assignment.objects.filter(solution__campaign=campaign, labeler=request.user,
                                                status=AssignmentStatus.LEASED).first()
    return render(request, "annotate/campaign.html", {
        "campaign": campaign, "membership": membership, "open_assignment": open_assignment,
        "instructions_html": render_markdown(campaign.instructions),
        # offer only what the role may do: a researcher's "Start labeling" would end on "Not allowed"
        "may_label": permissions.can_label(request.user, campaign),
        "may_research": permissions.can_research(request.user, campaign),
        "may_manage": permissions.can_manage(request.user, campaign),
    })


@login_required
@require_POST
def start(request: AppRequest, slug: str) -> HttpResponse:
    campaign = get_object_or_404(permissions.member_campaigns(request.user), slug=slug)  # an outsider's 404
    try:
        outcome = leases.lease_next_solution(campaign, request.user)
    except NotAllowed as error:
        return _alert(request, str(error), 403)
    return _go_next(request, outcome, slug)


AssignmentView = Callable[[AppRequest, int], HttpResponse]


def _refusal_in_place(view: AssignmentView) -> AssignmentView:
    """A refusal of the labeling rules (not yours, lease gone, bad input) is answered like every other: in
    #alerts with its status (403, 409, 400)."""
    @wraps(view)
    def answered(request: AppRequest, assignment_id: int) -> HttpResponse:
        try:
            return view(request, assignment_id)
        except LabelingError as error:
            return _error_response(request, error, assignment_id)
    return answered


@login_required
@require_GET
@_refusal_in_place
def workspace(request: AppRequest, assignment_id: int) -> HttpResponse:
    ws = load_workspace(assignment_id, request.user)
    if ws.assignment.status == AssignmentStatus.LEASED:
        leases.renew_lease(ws.assignment)  # an open page is a live lease
    return render(request, "annotate/workspace.html", _workspace_context(request, ws))


RowAction = Callable[[AppRequest, int, dict[str, Any]], HttpResponse]


def _row_action(form_class: type[django_forms.Form]) -> Callable[[RowAction], AssignmentView]:
    """A workspace button's POST (rate, flag, decide): a bad form is answered with its first error, the action
    gets the clean data, and a refusal is answered in place like every other."""
    def decorate(action: RowAction) -> AssignmentView:
        @wraps(action)
        def view(request: AppRequest, assignment_id: int) -> HttpResponse:
            form = form_class(request.POST)
            if not form.is_valid():
                return _alert(request, forms.first_error(form), 400)
            return action(request, assignment_id, form.cleaned_data)
        return _refusal_in_place(view)
    return decorate


def _marked_row(request: AppRequest, assignment: Assignment, step_index: int, mark: str) -> HttpResponse:
    """The row of a step whose mark (Unsure, bad split) was just set or cleared, announcing it as ``mark``."""
    ws = load_workspace(assignment.pk, request.user, step_indexes=[step_index], checked=assignment)
    return _rows_response(request, ws, step_index, f"Saved: step {step_index + 1} {mark}.")


@login_required
@require_POST
@_row_action(forms.RatingForm)
def rate(request: AppRequest, assignment_id: int, data: dict[str, Any]) -> HttpResponse:
    result = labeling.record_rating(assignment_id, user=request.user, step_index=data["step_index"],
                                    rating=data["rating"], completion_index=data["completion_index"],
                                    time_ms=data["time_ms"], rationale=data["rationale"],
                                    error_category=data["error_category"])
    campaign = result.workspace.assignment.solution.campaign
    stepwise = campaign.is_stepwise
    what = f"Step {data['step_index'] + 1}" + ("" if stepwise else f", candidate {data['completion_index'] + 1},")
    announce = f"Saved: {what} rated {campaign_scale(campaign).word(data['rating'])}."
    if result.rating.error_category:
        announce += f" Error: {result.rating.error_category}."
    if data["rationale"] is not None:
        announce += f" Reason: “{result.rating.rationale}”." if result.rating.rationale else " Reason cleared."
    first_error = result.workspace.progress.first_error
    if stepwise and first_error == data["step_index"]:
        announce += (" The steps after it are locked: press Enter (Submit) to finish,"
                     " or change this rating to go on.")
    elif stepwise and first_error is not None:
        announce += f" Step {first_error + 1} is still −1: Submit, or change that rating to go on."
    return _rows_response(request, result.workspace, data["step_index"], announce, result.removed_notice)


@login_required
@require_POST
@_row_action(forms.FlagForm)
def flag(request: AppRequest, assignment_id: int, data: dict[str, Any]) -> HttpResponse:
    rating = labeling.flag_step(assignment_id, user=request.user, step_index=data["step_index"],
                                flagged=data["flagged"], completion_index=data["completion_index"])
    mark = "marked Unsure" if data["flagged"] else "no longer marked Unsure"
    return _marked_row(request, rating.assignment, data["step_index"], mark)


@login_required
@require_POST
@_row_action(forms.BadSplitForm)
def bad_split(request: AppRequest, assignment_id: int, data: dict[str, Any]) -> HttpResponse:
    assignment = labeling.report_bad_split(assignment_id=assignment_id, user=request.user,
                                           step_index=data["step_index"], reported=data["reported"],
                                           note=data["note"])
    mark = "reported as a bad split" if data["reported"] else "no longer reported as a bad split"
    return _marked_row(request, assignment, data["step_index"], mark)


@login_required
@require_POST
@_row_action(forms.DecisionForm)
def decide(request: AppRequest, assignment_id: int, data: dict[str, Any]) -> HttpResponse:
    decision = labeling.decide_step(assignment_id, user=request.user, step_index=data["step_index"],
                                    chosen_completion=data["chosen_completion"],
                                    human_text=data["human_text"] or None)
    ws = load_workspace(assignment_id, request.user,
                                 step_indexes=[data["step_index"], data["step_index"] + 1],
                                 checked=decision.assignment)
    return _rows_response(request, ws, data["step_index"], f"Saved: the continuation of step {data['step_index'] + 1}.")


def _go_next(request: AppRequest, outcome: leases.LeaseOutcome, slug: str) -> HttpResponse:
    """To the leased assignment's workspace, or back to the campaign's page saying why there is none."""
    if outcome.assignment is None:
        messages.info(request, outcome.reason)
        return redirect("annotate:campaign", slug)
    if outcome.lapsed is not None:
        messages.warning(request, outcome.lapsed_words)
    return redirect("annotate:workspace", outcome.assignment.pk)


@login_required
@require_POST
def finish(request: AppRequest, assignment_id: int) -> HttpResponse:
    """Bad problem / give up (each with its reason), then straight on to the next solution. From the page
    (htmx) a refusal is answered in place, in #alerts, and nothing typed is lost."""
    form = forms.FinishForm(request.POST)
    if not form.is_valid():
        message = str(next(iter(form.errors.values()))[0])
        if request.htmx:
            return _alert(request, message, 400)
        return _workspace_error(request, assignment_id, message, 400)
    try:
        assignment = labeling.finish_assignment(assignment_id, user=request.user, reason=form.cleaned_data["reason"],
                                                text=form.cleaned_data["reason_text"])
        outcome = leases.lease_next_solution(assignment.solution.campaign, request.user)
    except LabelingError as error:
        if request.htmx:
            return _error_response(request, error, assignment_id)
        return _form_error(request, assignment_id, error)
    response = _go_next(request, outcome, assignment.solution.campaign.slug)
    if request.htmx:  # htmx follows a 302 in place; the page must change as a whole instead
        redirect_to = response["Location"]
        response = HttpResponse(status=200)
        response["HX-Redirect"] = redirect_to
    return response


@login_required
@require_POST
def next_solution(request: AppRequest, assignment_id: int) -> HttpResponse:
    """Submit a complete pass (every step rated, no −1) or leave a finished one, and lease the next."""
    try:
        outcome = leases.finish_and_lease_next(assignment_id, request.user)
    except LabelingError as error:
        return _form_error(request, assignment_id, error)
    if outcome.assignment is not None:
        return redirect("annotate:workspace", outcome.assignment.pk)
    slug = Assignment.objects.filter(pk=assignment_id).values_list("solution__campaign__slug", flat=True).first()
    if slug is None:
        raise Http404
    return _go_next(request, outcome, slug)


@login_required
@require_POST
@_refusal_in_place
def heartbeat(request: AppRequest, assignment_id: int) -> HttpResponse:
    expires = leases.heartbeat(assignment_id, request.user)
    response = HttpResponse(status=204)
    response["X-Lease-Expires"] = expires.isoformat()
    return response


@login_required
@require_POST
@_refusal_in_place
def outcome(request: AppRequest, assignment_id: int) -> HttpResponse:
    """The labeler rates the final answer (human-graded campaigns): the outcome block is re-rendered."""
    form = forms.OutcomeForm(request.POST)
    if not form.is_valid():
        return _alert(request, forms.first_error(form), 400)
    assignment = labeling.record_outcome(assignment_id, user=request.user, correct=form.cleaned_data["correct"])
    if not request.htmx:
        return redirect("annotate:workspace", assignment_id)
    word = {True: "correct", False: "incorrect", None: "not rated"}[assignment.outcome_correct]
    return render(request, "annotate/_outcome.html", {"assignment": assignment, "is_open": True,
                                                      "announce_outcome": f"Saved: the final answer is {word}."})


@login_required
@require_POST
@_refusal_in_place
def resume(request: AppRequest, assignment_id: int) -> HttpResponse:
    """Take an expired lease back (when its slot is still free) so the ratings given on it count."""
    leases.resume_expired_lease(assignment_id, request.user)
    return redirect("annotate:workspace", assignment_id)


"""The workspace's HTTP surface with Django's test client: every rule and every error message."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotate.models import (
    Assignment,
    AssignmentStatus,
    CampaignMode,
    Membership,
    Rating,
    RatingRevision,
    Role,
    StepDecision,
)
from annotate.services.leases import reap_expired_leases
from tests.factories import PASSWORD, solution_with_steps

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def stepwise(campaign_factory):
    campaign = campaign_factory("algebra", name="Algebra", instructions="Rate **every** step; $x^2$ is math.\n\n"
                                "<script>alert(1)</script>")
    solution_with_steps(campaign, ["First, $3 \\times 4 = 12$.", "So the answer is $\\boxed{12}$.", "Done."])
    solution_with_steps(campaign, ["Second solution step.", "Another."])
    return campaign


def start(client: Client, slug: str) -> Assignment:
    response = client.post(f"/c/{slug}/start")
    assert response.status_code == 302, response.content
    assignment_id = int(response["Location"].rstrip("/").split("/")[-1])
    return Assignment.objects.get(pk=assignment_id)


def rate(client: Client, assignment: Assignment, step: int, value: object, **extra: object):
    data = {"step_index": step, "rating": value, **extra}
    return client.post(f"/assignments/{assignment.pk}/rate", data, **HX)


# --- access --------------------------------------------------------------------------------------------------

def test_anonymous_users_are_sent_to_login(stepwise, member) -> None:
    labeler = member(stepwise, "ann")
    assignment = start(login(labeler), "algebra")
    anonymous = Client()
    for method, url in [("get", "/c/algebra/"), ("post", "/c/algebra/start"),
                        ("get", f"/assignments/{assignment.pk}/"), ("post", f"/assignments/{assignment.pk}/rate")]:
        response = getattr(anonymous, method)(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert not Rating.objects.exists()


def test_only_active_labelers_of_the_campaign_can_lease(stepwise, campaign_factory, member) -> None:
    other = campaign_factory("geometry")
    outsider = member(other, "bob")
    researcher = member(stepwise, "res", role=Role.RESEARCHER)
    inactive = member(stepwise, "gone", is_active=False)
    # a campaign they are no (active) member of answers like one that does not exist: its slug tells them nothing
    for user in (outsider, inactive):
        assert login(user).get("/c/algebra/").status_code == 404, user
        assert login(user).post("/c/algebra/start").status_code == 404, user
    response = login(researcher).post("/c/algebra/start")
    assert response.status_code == 403 and b"not a labeler in this campaign" in response.content
    assert not Assignment.objects.exists()
    assert login(outsider).get("/c/nope/").status_code == 404


def test_labeler_cannot_see_or_write_anothers_assignment(stepwise, member) -> None:
    ann, bob = member(stepwise, "ann"), member(stepwise, "bob")
    assignment = start(login(ann), "algebra")
    client = login(bob)
    response = client.get(f"/assignments/{assignment.pk}/")
    assert response.status_code == 403 and b"This is not your assignment." in response.content
    response = rate(client, assignment, 0, 1)
    assert response.status_code == 403 and response["HX-Retarget"] == "#alerts"
    assert b"This is not your assignment." in response.content
    assert client.post(f"/assignments/{assignment.pk}/heartbeat").status_code == 403
    assert not Rating.objects.exists()


def test_removed_labeler_cannot_rate_an_open_lease(stepwise, member) -> None:
    ann = member(stepwise, "ann")
    client = login(ann)
    assignment = start(client, "algebra")
    Membership.objects.filter(user=ann).update(is_active=False)
    response = rate(client, assignment, 0, 1)
    assert response.status_code == 403 and b"not an active labeler" in response.content
    assert not Rating.objects.exists()


def test_csrf_is_required_on_posts(stepwise, member) -> None:
    member(stepwise, "ann")
    client = Client(enforce_csrf_checks=True)
    client.login(username="ann", password=PASSWORD)
    assert client.post("/c/algebra/start").status_code == 403
    page = client.get("/c/algebra/")
    token = page.context["csrf_token"]
    assert client.post("/c/algebra/start", {"csrfmiddlewaretoken": str(token)}).status_code == 302
    assignment = Assignment.objects.get()
    assert client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 0, "rating": 1}, **HX).status_code == 403
    workspace = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in workspace
    response = client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 0, "rating": 1},
                           HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value, **HX)
    assert response.status_code == 200
    assert Rating.objects.get().rating == 1


# --- pages ---------------------------------------------------------------------------------------------------

def test_home_and_campaign_page_hooks(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    home = client.get("/").content.decode()
    assert 'data-campaign="algebra"' in home
    page = client.get("/c/algebra/").content.decode()
    assert 'data-action="start"' in page and "Start labeling" in page
    assert "<strong>every</strong>" in page and "$x^2$" in page  # Markdown rendered, math left for KaTeX
    assert "<script>alert(1)" not in page  # instructions are sanitised


def test_start_leases_and_resumes_the_same_solution(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    first = start(client, "algebra")
    assert "Resume labeling" in client.get("/c/algebra/").content.decode()
    assert start(client, "algebra").pk == first.pk
    page = client.get(f"/assignments/{first.pk}/").content.decode()
    assert page.count("data-step-index=") == 3
    for index in range(3):
        assert f'data-step-index="{index}"' in page
    assert page.count('data-rating="-1"') == 3 and page.count('data-rating="1"') == 3
    assert 'aria-pressed="true"' not in page
    assert "Reference answer: " in page and "\\(12\\)" in page
    for action in ("bad-problem", "give-up", "next"):
        assert f'data-action="{action}"' in page


def test_no_work_left_says_so(campaign_factory, member) -> None:
    campaign = campaign_factory("empty")
    client = login(member(campaign, "ann"))
    response = client.post("/c/empty/start", follow=True)
    assert b"No work left in this campaign for you." in response.content


def test_step_text_is_escaped(campaign_factory, member) -> None:
    campaign = campaign_factory("xss")
    solution_with_steps(campaign, ["<script>window.pwned=1</script> and <img src=x onerror=alert(1)>"])
    client = login(member(campaign, "ann"))
    assignment = start(client, "xss")
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert "<script>window.pwned" not in page and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "<img src=x" not in page


# --- rating --------------------------------------------------------------------------------------------------

def test_rating_is_saved_and_row_rerendered(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    response = rate(client, assignment, 0, 1, time_ms=1234)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<li id="step-0"')
    assert 'data-rating="1" title="Great: correct and helpful (3 or +)"\n                aria-pressed="true"' in body
    assert 'id="step-1"' in body and 'id="progress"' in body and 'hx-swap-oob="true"' in body
    assert "1 / 3 steps rated" in body
    saved = Rating.objects.get()
    assert (saved.rating, saved.time_ms, saved.completion.step.index) == (1, 1234, 0)
    # Changed in place: one rating, one revision.
    rate(client, assignment, 0, 0)
    saved.refresh_from_db()
    assert saved.rating == 0 and RatingRevision.objects.filter(rating=saved).count() == 1
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert page.count('aria-pressed="true"') == 1


@pytest.mark.parametrize(("data", "message"), [
    ({"step_index": 0, "rating": 2}, "rating must be -1, 0 or 1, not 2."),
    ({"step_index": 0}, "rating is required (-1, 0 or 1)."),
    ({"rating": 1}, "step_index is required."),
    ({"step_index": "x", "rating": 1}, "step_index must be a whole number."),
    ({"step_index": 0, "rating": 1, "time_ms": -5}, "time_ms must not be negative."),
    ({"step_index": 0, "rating": 1, "time_ms": "soon"}, "time_ms must be a whole number of milliseconds."),
    ({"step_index": 9, "rating": 1}, "Step 9 has no completion 0."),
    ({"step_index": 1, "rating": 1}, "Rate step 1 first: steps are rated in order."),
])
def test_bad_rating_inputs_name_the_problem(stepwise, member, data, message) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    response = client.post(f"/assignments/{assignment.pk}/rate", data, **HX)
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#alerts"
    assert message in response.content.decode()
    assert not Rating.objects.filter(rating__isnull=False).exists()


def test_minus_one_locks_the_later_steps_until_the_labeler_submits(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    rate(client, assignment, 0, 1)
    response = rate(client, assignment, 1, -1)
    body = response.content.decode()
    assert response.status_code == 200 and "HX-Redirect" not in response
    assert 'id="step-2"' in body and 'data-found-error' in body and "Submit: found an error" in body
    assert 'role="status" aria-live="polite"' in body and "Saved: Step 2 rated −1 (bad)." in body
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED and not assignment.finish_reason
    # Nothing after the −1 can be rated or marked.
    response = rate(client, assignment, 2, 1)
    assert response.status_code == 400
    assert "Step 2 is rated −1: nothing after the first error can be rated." in response.content.decode()
    response = client.post(f"/assignments/{assignment.pk}/flag", {"step_index": 2, "flagged": "true"}, **HX)
    assert response.status_code == 400 and "Step 2 is rated −1" in response.content.decode()
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    step2 = page[page.index('id="step-2"'):]
    assert "state-locked" in step2[:100] and step2.count("disabled") == 4
    # An accidental −1 is undone before submitting: the next step opens again.
    response = rate(client, assignment, 1, 0)
    assert response.status_code == 200 and "data-found-error" not in response.content.decode()
    assert rate(client, assignment, 2, 1).status_code == 200
    assert rate(client, assignment, 2, -1).status_code == 200  # the last step: nothing after it to remove
    # "Submit" (Enter) ends it as found_error with the ratings the labeler stands by, then leases the next one.
    response = client.post(f"/assignments/{assignment.pk}/next")
    new = Assignment.objects.get(labeler__username="ann", status=AssignmentStatus.LEASED)
    assert response.status_code == 302 and response["Location"] == f"/assignments/{new.pk}/"
    assert new.solution_id != assignment.solution_id
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.finish_reason == "found_error"
    assert assignment.total_time_ms is not None and assignment.total_time_ms >= 0
    assert list(Rating.objects.filter(assignment=assignment).order_by("completion__step__index")
                .values_list("rating", flat=True)) == [1, 0, -1]
    response = rate(client, assignment, 2, 1)
    assert response.status_code == 400
    assert "This solution is already finished; ratings can no longer change." in response.content.decode()
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert 'data-finished="found_error"' in page and "disabled" in page


def test_an_earlier_minus_one_removes_the_later_ratings_and_says_so(campaign_factory, member) -> None:
    campaign = campaign_factory("four")
    solution_with_steps(campaign, ["One.", "Two.", "Three.", "Four."])
    labeler = member(campaign, "ann")
    client = login(labeler)
    assignment = start(client, "four")
    for index in range(3):
        rate(client, assignment, index, 1)
    client.post(f"/assignments/{assignment.pk}/flag", {"step_index": 2, "flagged": "true"}, **HX)
    response = rate(client, assignment, 0, -1)
    body = response.content.decode()
    assert response.status_code == 200
    assert ("Steps 2 and 3 were rated after step 1, which is now −1: their ratings were removed from this pass "
            "(kept in the revision history).") in body and "data-removed" in body
    assert all(f'id="step-{index}"' in body for index in range(4))  # every later row re-rendered, locked
    assert body.count("state-locked") == 3
    assert list(Rating.objects.filter(assignment=assignment).values_list("completion__step__index", "rating")) == [
        (0, -1)]
    assert not StepDecision.objects.filter(assignment=assignment, step__index__gt=0).exists()
    removed = RatingRevision.objects.filter(assignment=assignment, removed_from_pass=True).order_by(
        "completion__step__index")
    assert [(r.completion.step.index, r.previous_rating, r.previous_flagged, r.changed_by_id, r.rating_id)
            for r in removed] == [(1, 1, False, labeler.pk, None), (2, 1, True, labeler.pk, None)]
    # The same −1 again (a double click, a retry) removes nothing more and says nothing.
    again = rate(client, assignment, 0, -1).content.decode()
    assert "data-removed" not in again and RatingRevision.objects.filter(removed_from_pass=True).count() == 2
    # Undoing the −1 opens step 2 again, empty: the removed ratings stay in the history only.
    page = rate(client, assignment, 0, 1).content.decode()
    assert 'data-rated' not in page[page.index('id="step-1"'):page.index('id="step-2"')]
    assert client.post(f"/assignments/{assignment.pk}/next").status_code == 400


def test_a_null_rating_cannot_leave_a_gap(stepwise, member) -> None:
    from annotate.services.errors import LabelingError
    from annotate.services.labeling import record_rating

    labeler = member(stepwise, "ann")
    assignment = start(login(labeler), "algebra")
    with pytest.raises(LabelingError, match="Rate step 1 first"):
        record_rating(assignment.pk, user=labeler, step_index=1, rating=None)
    record_rating(assignment.pk, user=labeler, step_index=0, rating=1)
    record_rating(assignment.pk, user=labeler, step_index=1, rating=1)
    with pytest.raises(LabelingError, match="Step 2 is rated: a rating can only be cleared from the last rated"):
        record_rating(assignment.pk, user=labeler, step_index=0, rating=None)
    record_rating(assignment.pk, user=labeler, step_index=1, rating=-1)
    with pytest.raises(LabelingError, match="Step 2 is rated −1"):
        record_rating(assignment.pk, user=labeler, step_index=2, rating=None)
    record_rating(assignment.pk, user=labeler, step_index=1, rating=None)  # the last rated step may be cleared
    assert list(Rating.objects.order_by("completion__step__index").values_list("rating", flat=True)) == [1, None]


def test_flag_unsure(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    response = client.post(f"/assignments/{assignment.pk}/flag", {"step_index": 0, "flagged": "true"}, **HX)
    assert response.status_code == 200
    assert 'data-flag title="Unsure (f)" aria-pressed="true"' in response.content.decode()
    assert Rating.objects.get().flagged is True
    response = client.post(f"/assignments/{assignment.pk}/flag", {"step_index": 0, "flagged": "maybe"}, **HX)
    assert response.status_code == 400 and "flagged must be true or false, not maybe." in response.content.decode()


# --- finishing -----------------------------------------------------------------------------------------------

def test_next_needs_every_step_rated(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    rate(client, assignment, 0, 1)
    response = client.post(f"/assignments/{assignment.pk}/next")
    assert response.status_code == 400
    assert "Rate every step (or give a −1) first (1 of 3 rated)." in response.content.decode()
    rate(client, assignment, 1, 0)
    rate(client, assignment, 2, 1)
    response = client.post(f"/assignments/{assignment.pk}/next")
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.finish_reason == "solution" and assignment.total_time_ms is not None
    second = Assignment.objects.get(status=AssignmentStatus.LEASED)
    assert response["Location"] == f"/assignments/{second.pk}/"
    rate(client, second, 0, 1)
    rate(client, second, 1, 1)
    response = client.post(f"/assignments/{second.pk}/next", follow=True)
    assert b"No work left in this campaign for you. Thank you!" in response.content


@pytest.mark.parametrize(("data", "message"), [
    ({"reason": "give_up"}, "Type a reason first: say why the problem is bad or why you give up."),
    ({"reason": "give_up", "reason_text": "   "}, "Type a reason first"),
    ({"reason_text": "hm"}, "reason is required (bad_problem or give_up)."),
    ({"reason": "solution", "reason_text": "hm"}, "reason must be bad_problem or give_up, not solution."),
])
def test_give_up_and_bad_problem_need_a_reason(stepwise, member, data, message) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    rate(client, assignment, 0, 1)
    response = client.post(f"/assignments/{assignment.pk}/finish", data)
    assert response.status_code == 400 and message in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED and Rating.objects.get().rating == 1


def test_give_up_from_the_page_is_answered_in_place(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert f'hx-post="/assignments/{assignment.pk}/finish" hx-target="#alerts"' in page
    assert '<label for="reason-text">' in page and "required" in page[page.index('id="reason-text"'):][:120]
    url = f"/assignments/{assignment.pk}/finish"
    refused = client.post(url, {"reason": "give_up", "reason_text": "  "}, **HX)
    body = refused.content.decode()
    assert refused.status_code == 400 and refused["HX-Retarget"] == "#alerts" and "<html" not in body
    assert "Type a reason first: say why the problem is bad or why you give up." in body
    assert "reason_text" not in body
    done = client.post(url, {"reason": "give_up", "reason_text": "no idea"}, **HX)
    new = Assignment.objects.get(status=AssignmentStatus.LEASED)
    assert done.status_code == 200 and done["HX-Redirect"] == f"/assignments/{new.pk}/"
    assignment.refresh_from_db()
    assert (assignment.finish_reason, assignment.finish_reason_text) == ("give_up", "no idea")
    # Refused by the rules (the pass is already finished): a readable message in place too.
    again = client.post(url, {"reason": "give_up", "reason_text": "twice"}, **HX)
    assert again.status_code == 400 and again["HX-Retarget"] == "#alerts"
    assert "This solution is already finished" in again.content.decode()


@pytest.mark.parametrize("reason", ["give_up", "bad_problem"])
def test_give_up_and_bad_problem_store_the_reason(stepwise, member, reason) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    response = client.post(f"/assignments/{assignment.pk}/finish", {"reason": reason, "reason_text": "too hard "})
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert (assignment.finish_reason, assignment.finish_reason_text) == (reason, "too hard")
    assert Assignment.objects.filter(status=AssignmentStatus.LEASED).count() == 1


# --- leases --------------------------------------------------------------------------------------------------

def test_heartbeat_renews_the_lease(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    Assignment.objects.filter(pk=assignment.pk).update(lease_expires_at=timezone.now() + timedelta(minutes=1))
    response = client.post(f"/assignments/{assignment.pk}/heartbeat", **HX)
    assert response.status_code == 204
    assignment.refresh_from_db()
    assert assignment.lease_expires_at > timezone.now() + timedelta(minutes=25)
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert f'hx-post="/assignments/{assignment.pk}/heartbeat" hx-trigger="every 60s"' in page


def test_expired_lease_says_so_and_can_be_resumed(stepwise, member) -> None:
    client = login(member(stepwise, "ann"))
    assignment = start(client, "algebra")
    rate(client, assignment, 0, 1)
    Assignment.objects.filter(pk=assignment.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert reap_expired_leases() == 1
    response = rate(client, assignment, 1, 1)
    assert response.status_code == 409 and response["HX-Retarget"] == "#alerts"
    body = response.content.decode()
    assert "Your lease on this solution expired" in body and 'data-action="resume"' in body
    assert client.post(f"/assignments/{assignment.pk}/heartbeat", **HX).status_code == 409
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert "Your lease on this solution expired" in page
    assert Rating.objects.filter(rating__isnull=False).count() == 1  # the earlier rating is kept
    response = client.post(f"/assignments/{assignment.pk}/resume")
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED and assignment.solution.label_count == 1
    assert rate(client, assignment, 1, 1).status_code == 200
    assert Rating.objects.filter(assignment=assignment, rating=1).count() == 2


def test_expired_lease_taken_by_someone_else_cannot_be_resumed(stepwise, member) -> None:
    ann, bob = member(stepwise, "ann"), member(stepwise, "bob")
    client = login(ann)
    assignment = start(client, "algebra")
    Assignment.objects.filter(pk=assignment.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    reap_expired_leases()
    taken = start(login(bob), "algebra")
    assert taken.solution_id == assignment.solution_id
    response = client.post(f"/assignments/{assignment.pk}/resume")
    assert response.status_code == 409
    assert "went to another labeler" in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.EXPIRED


# --- conversational mode -------------------------------------------------------------------------------------

@pytest.fixture
def conversational(campaign_factory):
    campaign = campaign_factory("chat", mode=CampaignMode.CONVERSATIONAL)
    solution_with_steps(campaign, [["$3 \\cdot 4 = 12$", "$3 \\cdot 4 = 13$"], ["So $12$.", "So $13$."]])
    return campaign


def test_conversational_flow(conversational, member) -> None:
    client = login(member(conversational, "ann"))
    assignment = start(client, "chat")
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert page.count('data-completion-index="') == 2  # step 1 is locked until step 0 has a continuation
    assert "Continue from step 1 first." in page
    url = f"/assignments/{assignment.pk}/decide"
    response = client.post(url, {"step_index": 0, "chosen_completion": 0}, **HX)
    assert response.status_code == 400 and "Rate every completion of this step first." in response.content.decode()
    response = rate(client, assignment, 1, 1, completion_index=0)
    assert response.status_code == 400
    assert "Choose or write a continuation for step 1 first." in response.content.decode()
    rate(client, assignment, 0, 1, completion_index=0)
    rate(client, assignment, 0, -1, completion_index=1)
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.LEASED  # −1 does not end phase 1
    response = client.post(url, {"step_index": 0, "chosen_completion": 1}, **HX)
    assert response.status_code == 400
    assert "You cannot continue with a completion you rated −1." in response.content.decode()
    response = client.post(url, {"step_index": 0}, **HX)
    assert response.status_code == 400
    assert "Give exactly one of chosen_completion or human_text." in response.content.decode()
    response = client.post(url, {"step_index": 0, "chosen_completion": 0}, **HX)
    assert response.status_code == 200 and 'id="step-1"' in response.content.decode()
    assert 'data-completion-index="1"' in response.content.decode()
    # Step 1: none is +1, so the labeler writes their own.
    rate(client, assignment, 1, 0, completion_index=0)
    rate(client, assignment, 1, -1, completion_index=1)
    response = client.post(url, {"step_index": 1, "human_text": "So the answer is $12$."}, **HX)
    assert response.status_code == 200
    decision = StepDecision.objects.get(assignment=assignment, step__index=1)
    assert decision.human_completion["text"] == "So the answer is $12$." and decision.chosen_completion is None
    assert client.post(f"/assignments/{assignment.pk}/next").status_code == 302
    assignment.refresh_from_db()
    assert assignment.finish_reason == "solution"


def test_conversational_cannot_write_own_when_one_is_plus_one(conversational, member) -> None:
    client = login(member(conversational, "ann"))
    assignment = start(client, "chat")
    rate(client, assignment, 0, 1, completion_index=0)
    rate(client, assignment, 0, 0, completion_index=1)
    response = client.post(f"/assignments/{assignment.pk}/decide", {"step_index": 0, "human_text": "mine"}, **HX)
    assert response.status_code == 400
    assert "A completion is rated +1: continue with it instead of writing your own." in response.content.decode()
    assert not StepDecision.objects.filter(human_completion__isnull=False).exists()


# --- duplicate submissions -----------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", [1, -1])
def test_a_double_click_sent_at_once_is_one_rating(campaign_factory, member, value: int) -> None:
    """Two identical POSTs racing on separate connections (double-click, a retried request): one rating, no
    revision, and neither request fails with a server error; a racing −1 leaves the pass open for "Submit"."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    campaign = campaign_factory("race")
    solution_with_steps(campaign, ["First.", "Second."])
    labeler = member(campaign, "ann")
    assignment = start(login(labeler), "race")
    barrier = Barrier(2)

    def post(_: int) -> int:
        client = login(labeler)
        barrier.wait()
        try:
            return rate(client, assignment, 0, value).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        statuses = sorted(pool.map(post, range(2)))
    assert all(status < 500 for status in statuses), statuses
    assert 200 in statuses
    assert Rating.objects.filter(assignment=assignment).count() == 1
    assert Rating.objects.get(assignment=assignment).rating == value
    assert not RatingRevision.objects.exists()
    assignment.refresh_from_db()
    assert (assignment.status, assignment.finish_reason or "") == ("leased", "")  # a −1 waits for "Submit"

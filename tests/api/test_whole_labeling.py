"""The whole-solution endpoint keeps every labeling rule of the page (each refusal naming its step or field),
applies all or nothing, and a retry with the same client key never doubles work."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from annotate.models import (
    ERROR_CATEGORY_MAX_CHARS,
    Assignment,
    AssignmentStatus,
    LabelingKey,
    Membership,
    Rating,
    RatingRevision,
    Role,
    StepRationale,
)
from annotate.services import leases
from annotate.services.whole_labeling import LabelingInput, StepLabel, apply_labeling
from tests.factories import solution_with_steps

from .conftest import token_client

STEPS = ["One.", "Two.", "Three.", "Four."]


def _leased(campaign_factory, make_user, slug: str = "whole", username: str = "judge", **fields: Any):
    campaign = campaign_factory(slug, **fields)
    solution_with_steps(campaign, STEPS)
    labeler = get_user_model().objects.filter(username=username).first() or make_user(username)
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    client, _ = token_client(labeler, "write")
    lease = client.post(f"/api/campaigns/{campaign.pk}/lease/").json()
    return client, lease["assignment"]["id"], labeler


def _body(values: list[int | None], key: str = "k-1", **extra: Any) -> dict[str, Any]:
    return {"ratings": [{"step_index": i, "rating": v} for i, v in enumerate(values)], "client_key": key, **extra}


def _stored(assignment_id: int) -> list[tuple[int, int | None]]:
    return list(Rating.objects.filter(assignment_id=assignment_id).order_by("completion__step__index")
                .values_list("completion__step__index", "rating"))


@pytest.mark.django_db
def test_a_whole_solution_in_one_request_is_rated_and_finished(campaign_factory, make_user) -> None:
    client, assignment_id, _ = _leased(campaign_factory, make_user)
    answer = client.post(f"/api/assignments/{assignment_id}/labeling/", _body([1, 0, 1, 1], total_time_ms=5000),
                         format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["status"], body["finish_reason"], body["total_time_ms"], body["replayed"]) == (
        "submitted", "solution", 5000, False)
    assert [(r["step_index"], r["rating"]) for r in body["ratings"]] == [(0, 1), (1, 0), (2, 1), (3, 1)]
    assert _stored(assignment_id) == [(0, 1), (1, 0), (2, 1), (3, 1)]


@pytest.mark.django_db
def test_a_minus_one_ends_as_found_error_and_nothing_may_follow_it(campaign_factory, make_user) -> None:
    client, assignment_id, _ = _leased(campaign_factory, make_user)
    url = f"/api/assignments/{assignment_id}/labeling/"
    after = client.post(url, _body([1, -1, 1]), format="json")
    assert after.status_code == 400
    assert after.json() == {"field": "ratings[2]", "detail": "Step 3: Step 2 is rated −1: nothing after the first "
                            "error can be rated. Change that rating first if it was a mistake."}
    assert _stored(assignment_id) == [] and not LabelingKey.objects.exists()  # all or nothing
    as_solution = client.post(url, _body([1, -1], finish_reason="solution"), format="json")
    assert as_solution.status_code == 400 and as_solution.json() == {
        "field": "finish_reason", "detail": "Step 2 is rated −1: this solution ends as “found error”."}
    done = client.post(url, _body([1, -1]), format="json")
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"
    assert _stored(assignment_id) == [(0, 1), (1, -1)]


@pytest.mark.django_db
def test_each_refusal_names_its_step_or_field(campaign_factory, make_user) -> None:
    client, assignment_id, _ = _leased(campaign_factory, make_user, step_rationale=StepRationale.REQUIRED)
    url = f"/api/assignments/{assignment_id}/labeling/"
    gap = client.post(url, {"ratings": [{"step_index": 0, "rating": 1}, {"step_index": 2, "rating": 1}],
                            "client_key": "gap"}, format="json")
    assert gap.status_code == 400 and gap.json() == {
        "field": "ratings[1]", "detail": "Step 3: Rate step 2 first: steps are rated in order."}
    incomplete = client.post(url, _body([1, 1]), format="json")
    assert incomplete.status_code == 400 and incomplete.json() == {
        "field": "finish_reason", "detail": "Rate every step (or give a −1) first (2 of 4 rated)."}
    no_reason = client.post(url, _body([1, -1]), format="json")
    assert no_reason.status_code == 400 and no_reason.json()["field"] == "finish_reason"
    assert "Step 2 is rated −1 without a reason" in no_reason.json()["detail"]
    two_lines = client.post(url, {"ratings": [{"step_index": 0, "rating": -1, "rationale": "a\nb"}],
                                  "client_key": "x"}, format="json")
    assert two_lines.status_code == 400 and two_lines.json() == {
        "field": "ratings[0]", "detail": "Step 1: The reason must be one line: remove the line breaks."}
    out_of_range = client.post(url, {"ratings": [{"step_index": 0, "rating": 2}], "client_key": "x"}, format="json")
    assert out_of_range.status_code == 400, out_of_range.json()
    assert out_of_range.json()["field"] == "ratings[0]"  # not on PRM800K's scale: the rating service says so
    off_any_scale = client.post(url, {"ratings": [{"step_index": 0, "rating": 10}], "client_key": "y"}, format="json")
    assert off_any_scale.status_code == 400 and "rating" in off_any_scale.json()["ratings"]["0"]
    no_key = client.post(url, {"ratings": []}, format="json")
    assert no_key.status_code == 400 and "client_key" in no_key.json()
    give_up = client.post(url, _body([], finish_reason="give_up"), format="json")
    assert give_up.status_code == 400 and give_up.json() == {
        "field": "finish_reason", "detail": "Say why: a reason is required for “bad problem” and “give up”."}
    assert _stored(assignment_id) == [] and Assignment.objects.get(pk=assignment_id).status == AssignmentStatus.LEASED
    with_reason = client.post(url, {"ratings": [{"step_index": 0, "rating": 1},
                                                {"step_index": 1, "rating": -1, "rationale": "sign slip"}],
                                    "client_key": "ok"}, format="json")
    assert with_reason.status_code == 200
    assert with_reason.json()["ratings"][1]["rationale"] == "sign slip"


@pytest.mark.django_db
def test_lease_ownership_membership_and_scope(campaign_factory, make_user) -> None:
    client, assignment_id, labeler = _leased(campaign_factory, make_user)
    url = f"/api/assignments/{assignment_id}/labeling/"
    stranger, _ = token_client(make_user("stranger"), "write")
    mine_not = stranger.post(url, _body([1, 1, 1, 1]), format="json")
    assert mine_not.status_code == 404 and mine_not.json()["field"] == "assignment"
    for body in ({"ratings": "none", "client_key": ""}, "{not json"):  # whatever the body holds
        answer = stranger.post(url, body, format="json") if isinstance(body, dict) else stranger.post(
            url, body, content_type="application/json")
        assert answer.status_code == 404 and answer.json()["field"] == "assignment", answer.content
    for missing in (999999999, 2**63, 10**30):  # past bigint too: a 404, not the database's overflow as a 500
        answer = client.post(f"/api/assignments/{missing}/labeling/", _body([1]), format="json")
        assert answer.status_code == 404 and answer.json()["field"] == "assignment", (missing, answer.content)
    read_only, _ = token_client(labeler, "read")
    assert read_only.post(url, _body([1, 1, 1, 1]), format="json").status_code == 403
    Membership.objects.filter(user=labeler).update(is_active=False)
    removed = client.post(url, _body([1, 1, 1, 1]), format="json")
    assert removed.status_code == 403 and removed.json() == {
        "field": "assignment", "detail": "You are not an active labeler in this campaign any more."}
    Membership.objects.filter(user=labeler).update(is_active=True)
    leases.reap_expired_leases(now=Assignment.objects.get(pk=assignment_id).lease_expires_at
                                 + timedelta(seconds=1))
    expired = client.post(url, _body([1, 1, 1, 1]), format="json")
    assert expired.status_code == 409 and expired.json()["field"] == "assignment"
    assert "expired" in expired.json()["detail"] and _stored(assignment_id) == []


@pytest.mark.django_db
def test_a_retry_with_the_same_key_answers_the_first_result_and_applies_nothing(campaign_factory, make_user) -> None:
    client, assignment_id, labeler = _leased(campaign_factory, make_user)
    url = f"/api/assignments/{assignment_id}/labeling/"
    first = client.post(url, _body([1, 0, 1, 1], key="judge-run-7"), format="json")
    retry = client.post(url, _body([1, 0, 1, 1], key="judge-run-7"), format="json")
    assert first.status_code == retry.status_code == 200
    assert retry.json()["replayed"] is True
    assert {**retry.json(), "replayed": False} == first.json()
    assert Rating.objects.filter(assignment_id=assignment_id).count() == 4
    assert not RatingRevision.objects.exists() and LabelingKey.objects.count() == 1
    # The key belongs to that labeling: reusing it for another assignment is refused, naming it.
    other, other_id, _ = _leased(campaign_factory, make_user, slug="whole-2", username="judge")
    reused = other.post(f"/api/assignments/{other_id}/labeling/", _body([1, 1, 1, 1], key="judge-run-7"),
                        format="json")
    assert reused.status_code == 400 and reused.json() == {
        "field": "client_key", "detail": f"This client key was already used for assignment {assignment_id}; use a "
                                         f"new key for each labeling."}
    assert Assignment.objects.get(pk=other_id).status == AssignmentStatus.LEASED
    # A refused request stores no key: fixed, the same key goes through.
    fixed = other.post(f"/api/assignments/{other_id}/labeling/", _body([1, 1], key="fixed"), format="json")
    assert fixed.status_code == 400 and not LabelingKey.objects.filter(client_key="fixed").exists()
    assert other.post(f"/api/assignments/{other_id}/labeling/", _body([1, 1, 0, 0], key="fixed"),
                      format="json").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_apply_once(campaign_factory, make_user) -> None:
    """Two requests with one key at once (a client timing out and retrying): one applies, the other waits on
    the key's unique index and answers the same labeling as a replay."""
    _, assignment_id, labeler = _leased(campaign_factory, make_user)
    given = LabelingInput(assignment_id=assignment_id, client_key="same",
                          ratings=[StepLabel(step_index=i, rating=1) for i in range(4)])
    replays: list[bool] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def send() -> None:
        try:
            start.wait(timeout=10)
            replays.append(apply_labeling(given, labeler).replayed)
        except BaseException as error:  # noqa: BLE001  (reported by the assertion below)
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and sorted(replays) == [False, True]
    assert Rating.objects.filter(assignment_id=assignment_id).count() == 4 and not RatingRevision.objects.exists()


@pytest.mark.django_db
def test_bulk_labels_several_assignments_each_on_its_own(campaign_factory, make_user) -> None:
    client, first_id, _ = _leased(campaign_factory, make_user)
    _, second_id, _ = _leased(campaign_factory, make_user, slug="whole-2", username="judge")
    _, third_id, _ = _leased(campaign_factory, make_user, slug="whole-3", username="judge")
    answer = client.post("/api/labelings/", {"labelings": [
        {"assignment": first_id, **_body([1, 1, 1, 1], key="a")},
        {"assignment": second_id, **_body([1, -1, 1], key="b")},
        {"assignment": 10**12, **_body([1], key="c")},
        {"assignment": third_id, **_body([0, -1], key="d")},
    ]}, format="json")
    assert answer.status_code == 200, answer.content
    results = answer.json()["results"]
    assert [(r["assignment"], r["status"]) for r in results] == [
        (first_id, 200), (second_id, 400), (10**12, 404), (third_id, 200)]
    assert results[0]["labeling"]["finish_reason"] == "solution" and results[0]["error"] is None
    assert results[1]["error"]["field"] == "ratings[2]" and results[1]["labeling"] is None
    assert results[3]["labeling"]["finish_reason"] == "found_error"
    assert _stored(second_id) == [] and _stored(third_id) == [(0, 0), (1, -1)]
    too_many = client.post("/api/labelings/", {"labelings": [
        {"assignment": first_id, **_body([], key=str(i))} for i in range(101)]}, format="json")
    assert too_many.status_code == 400 and "labelings" in too_many.json()


def test_the_endpoints_are_in_the_openapi_schema(client, make_user) -> None:
    api, _ = token_client(make_user("reader"), "read")
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "post" in schema["paths"]["/api/assignments/{id}/labeling/"]
    assert "post" in schema["paths"]["/api/labelings/"]
    assert {"LabelingInputRequest", "StepLabelInputRequest", "LabelingOut", "BulkLabelingInputRequest",
            "BulkLabelingOut", "LabelingRefusal"} <= set(schema["components"]["schemas"])


@pytest.mark.django_db
def test_one_request_stores_what_the_step_by_step_path_stores(campaign_factory, make_user) -> None:
    from annotate.models import StepDecision

    whole, whole_id, _ = _leased(campaign_factory, make_user, slug="whole-a", username="a")
    steps, steps_id, _ = _leased(campaign_factory, make_user, slug="whole-b", username="b")
    values = [1, 0, -1]
    ratings = [{"step_index": i, "rating": v, "flagged": i == 1, "time_ms": 700 + i} for i, v in enumerate(values)]
    answer = whole.post(f"/api/assignments/{whole_id}/labeling/", {"ratings": ratings, "client_key": "w"},
                        format="json")
    assert answer.status_code == 200
    # built from what is in memory, it is what reading the assignment back shows
    assert answer.json() == {**whole.get(f"/api/assignments/{whole_id}/").json(), "replayed": False}
    for row in ratings:
        assert steps.post(f"/api/assignments/{steps_id}/rate/", row, format="json").status_code == 200
    assert steps.post(f"/api/assignments/{steps_id}/finish/", {"reason": "found_error"},
                      format="json").status_code == 200

    def stored(assignment_id: int) -> tuple[Any, ...]:
        rows = list(Rating.objects.filter(assignment_id=assignment_id).order_by("completion__step__index").values_list(
            "completion__step__index", "rating", "flagged", "time_ms", "rationale", "suggestions_seen"))
        decided = list(StepDecision.objects.filter(assignment_id=assignment_id).order_by("step__index")
                       .values_list("step__index", "chosen_completion"))
        assignment = Assignment.objects.get(pk=assignment_id)
        return rows, decided, assignment.status, assignment.finish_reason

    assert stored(whole_id) == stored(steps_id)
    assert stored(whole_id)[0][1] == (1, 0, True, 701, "", "none")


@pytest.mark.django_db
def test_an_error_category_is_one_of_the_campaigns_and_is_stored(campaign_factory, make_user) -> None:
    """The rating service's rule, as on the page: a category must be one the campaign defines, on an error step."""
    url = "/api/assignments/{}/labeling/"
    client, plain_id, _ = _leased(campaign_factory, make_user)
    none_defined = client.post(url.format(plain_id), {
        "ratings": [{"step_index": 0, "rating": -1, "error_category": "arithmetic"}], "client_key": "c"},
        format="json")
    assert none_defined.status_code == 400 and none_defined.json()["field"] == "ratings[0]"
    assert "not an error category of this campaign" in none_defined.json()["detail"]
    client, assignment_id, _ = _leased(campaign_factory, make_user, slug="categories", username="judge2",
                                       error_categories=["calculation", "misread the question"])
    on_a_good_step = client.post(url.format(assignment_id), {
        "ratings": [{"step_index": 0, "rating": 1, "error_category": "calculation"}], "client_key": "d"},
        format="json")
    assert on_a_good_step.status_code == 400 and on_a_good_step.json()["field"] == "ratings[0]"
    done = client.post(url.format(assignment_id), {
        "ratings": [{"step_index": 0, "rating": 1}, {"step_index": 1, "rating": -1, "error_category": "calculation"}],
        "client_key": "e"}, format="json")
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"
    assert list(Rating.objects.filter(assignment_id=assignment_id).order_by("completion__step__index")
                .values_list("rating", "error_category")) == [(1, ""), (-1, "calculation")]


@pytest.mark.django_db
def test_an_error_category_over_the_columns_length_is_refused_alike_on_both_paths(campaign_factory,
                                                                                   make_user) -> None:
    """The whole-solution and the per-step input read one bound, the rating column's: one character over it is
    refused the same way by both, naming the field; at the bound, both take it."""
    longest = "x" * ERROR_CATEGORY_MAX_CHARS
    client, assignment_id, _ = _leased(campaign_factory, make_user, error_categories=[longest])
    url = f"/api/assignments/{assignment_id}"
    over = longest + "x"
    whole = client.post(f"{url}/labeling/", {
        "ratings": [{"step_index": 0, "rating": -1, "error_category": over}], "client_key": "f"}, format="json")
    per_step = client.post(f"{url}/rate/", {"step_index": 0, "rating": -1, "error_category": over}, format="json")
    assert whole.status_code == per_step.status_code == 400
    message = [f"Ensure this field has no more than {ERROR_CATEGORY_MAX_CHARS} characters."]
    assert whole.json() == {"ratings": {"0": {"error_category": message}}}
    assert per_step.json() == {"error_category": message}
    assert _stored(assignment_id) == []
    whole_at_the_bound = client.post(f"{url}/labeling/", {
        "ratings": [{"step_index": 0, "rating": -1, "error_category": longest}], "client_key": "g"}, format="json")
    assert whole_at_the_bound.status_code == 200, whole_at_the_bound.content
    other, other_id, _ = _leased(campaign_factory, make_user, slug="categories-2", username="judge2",
                                 error_categories=[longest])
    per_step_at_the_bound = other.post(f"/api/assignments/{other_id}/rate/",
                                       {"step_index": 0, "rating": -1, "error_category": longest}, format="json")
    assert per_step_at_the_bound.status_code == 200, per_step_at_the_bound.content
    assert list(Rating.objects.filter(assignment_id__in=[assignment_id, other_id])
                .values_list("error_category", flat=True)) == [longest, longest]


FOUR_VALUES = {"name": "four", "values": [
    {"value": -2, "label": "Wrong", "key": "1", "colour": "#c62828", "is_error": True, "positive": False},
    {"value": 1, "label": "Doubtful", "key": "2", "colour": "#9e9e9e", "is_error": False, "positive": None},
    {"value": 2, "label": "Fine", "key": "3", "colour": "#8bc34a", "is_error": False, "positive": True},
    {"value": 3, "label": "Insightful", "key": "4", "colour": "#2e7d32", "is_error": False, "positive": True},
]}


@pytest.mark.django_db
def test_a_whole_solution_keeps_the_campaigns_own_scale(campaign_factory, make_user) -> None:
    """The one-insert path reads the campaign's scale: its error value stops the pass, a value off the scale
    (PRM800K's −1 here) is refused in the page's words, and its own values are stored as sent."""
    client, assignment_id, _ = _leased(campaign_factory, make_user, slug="four-scale", step_scale=FOUR_VALUES)
    url = f"/api/assignments/{assignment_id}/labeling/"
    off_scale = client.post(url, _body([2, -1]), format="json")
    assert off_scale.status_code == 400 and off_scale.json()["field"] == "ratings[1]", off_scale.json()
    after_error = client.post(url, _body([3, -2, 2], key="k-2"), format="json")
    assert after_error.status_code == 400 and after_error.json()["field"] == "ratings[2]"
    assert _stored(assignment_id) == []
    done = client.post(url, _body([3, 1, -2], key="k-3"), format="json")
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"
    assert _stored(assignment_id) == [(0, 3), (1, 1), (2, -2)]

"""Stop-at-first-error through the REST API: the same invariant as the workspace, said in the answer."""
from __future__ import annotations

import pytest

from annotate.models import Assignment, Membership, Rating, RatingRevision, Role
from tests.factories import solution_with_steps

from .conftest import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api_pass(campaign_factory, make_user):
    campaign = campaign_factory("api-rule")
    solution_with_steps(campaign, ["One.", "Two.", "Three.", "Four."])
    labeler = make_user("api-labeler")
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    client, _ = token_client(labeler, "write")
    lease = client.post(f"/api/campaigns/{campaign.pk}/lease/").json()
    return client, f"/api/assignments/{lease['assignment']['id']}", lease["assignment"]["id"], labeler


def test_an_earlier_minus_one_removes_the_later_ratings_and_the_answer_lists_them(api_pass) -> None:
    client, base, assignment_id, labeler = api_pass
    for index in range(3):
        answer = client.post(f"{base}/rate/", {"step_index": index, "rating": 1}, format="json")
        assert answer.status_code == 200 and answer.json()["removed_ratings"] == [] and answer.json()["notice"] == ""
    answer = client.post(f"{base}/rate/", {"step_index": 1, "rating": -1}, format="json")
    body = answer.json()
    assert answer.status_code == 200 and body["status"] == "leased"  # a −1 waits for finish
    assert body["removed_ratings"] == [{"step_index": 2, "completion_index": 0, "rating": 1, "flagged": False}]
    assert body["notice"] == ("Step 3 was rated after step 2, which is now −1: its rating was removed from this "
                              "pass (kept in the revision history).")
    assert [(r["step_index"], r["rating"]) for r in body["ratings"]] == [(0, 1), (1, -1)]
    revision = RatingRevision.objects.get(assignment_id=assignment_id, removed_from_pass=True)
    assert (revision.completion.step.index, revision.previous_rating, revision.changed_by_id) == (2, 1, labeler.pk)

    after = client.post(f"{base}/rate/", {"step_index": 2, "rating": 1}, format="json")
    assert after.status_code == 400
    assert after.json()["detail"] == ("Step 2 is rated −1: nothing after the first error can be rated. Change that "
                                      "rating first if it was a mistake.")
    flagged = client.post(f"{base}/flag/", {"step_index": 3, "flagged": True}, format="json")
    assert flagged.status_code == 400 and "Step 2 is rated −1" in flagged.json()["detail"]
    as_solution = client.post(f"{base}/finish/", {"reason": "solution"}, format="json")
    assert as_solution.status_code == 400
    assert as_solution.json()["detail"] == "Step 2 is rated −1: this solution ends as “found error”."
    done = client.post(f"{base}/finish/", {"reason": "found_error"}, format="json")
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"
    assert list(Rating.objects.filter(assignment_id=assignment_id).order_by("completion__step__index")
                .values_list("rating", flat=True)) == [1, -1]


def test_null_ratings_cannot_slip_past_the_order_check(api_pass) -> None:
    client, base, assignment_id, _ = api_pass
    gap = client.post(f"{base}/rate/", {"step_index": 2, "rating": None}, format="json")
    assert gap.status_code == 400 and gap.json()["detail"] == "Rate step 1 first: steps are rated in order."
    for index in range(2):
        client.post(f"{base}/rate/", {"step_index": index, "rating": 0}, format="json")
    hole = client.post(f"{base}/rate/", {"step_index": 0, "rating": None}, format="json")
    assert hole.status_code == 400 and "Step 2 is rated: a rating can only be cleared" in hole.json()["detail"]
    client.post(f"{base}/rate/", {"step_index": 1, "rating": -1}, format="json")
    beyond = client.post(f"{base}/rate/", {"step_index": 2, "rating": None}, format="json")
    assert beyond.status_code == 400 and "Step 2 is rated −1" in beyond.json()["detail"]
    assert list(Rating.objects.filter(assignment_id=assignment_id).order_by("completion__step__index")
                .values_list("rating", flat=True)) == [0, -1]
    # The −1 was a slip: change it, carry on and finish as a solution.
    assert client.post(f"{base}/rate/", {"step_index": 1, "rating": 1}, format="json").status_code == 200
    for index in (2, 3):
        assert client.post(f"{base}/rate/", {"step_index": index, "rating": 1}, format="json").status_code == 200
    finished = client.post(f"{base}/finish/", {"reason": "solution"}, format="json")
    assert finished.status_code == 200 and Assignment.objects.get(pk=assignment_id).finish_reason == "solution"
    no_error = client.post(f"{base}/finish/", {"reason": "found_error"}, format="json")
    assert no_error.status_code == 400 and "already finished" in no_error.json()["detail"]

"""A −1's one-line reason (campaign setting step_rationale), "bad split" reports and the admin's re-split: the
services on PostgreSQL, the REST API, the pages, and the PRM800K / TRL exports and import round trip."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Completion,
    Rating,
    RatingRevision,
    Solution,
    SplitReport,
    StepRationale,
)
from annotate.prm800k.export import iter_prm800k_rows
from annotate.selectors import solutions_with_split_reports
from annotate.services import labeling, leases
from annotate.services.errors import LabelingError, LeaseExpired, NotAllowed
from annotate.services.prm800k_import import import_prm800k
from annotate.services.resplit import ResplitError, resplit_solution, steps_from_text
from rewards.exports import ExportOptions, iter_stepwise_rows
from tests.api.conftest import token_client
from tests.factories import PASSWORD, solution_with_steps

pytestmark = pytest.mark.django_db

STEPS = ["First $x = 1$.", "Then $y = 2$.", "So $x + y = 4$.", "# Answer\n\n4"]


@pytest.fixture
def lab(campaign_factory, personas):
    """A required-reason stepwise campaign with one solution, its people, and the labeler's open lease."""
    campaign = campaign_factory("why", step_rationale=StepRationale.REQUIRED)
    solution = solution_with_steps(campaign, STEPS)
    people = personas(campaign)
    assignment = leases.lease_next_solution(campaign, people.labeler).assignment
    assert assignment is not None and assignment.solution_id == solution.pk
    return campaign, solution, people, assignment


def _rate(assignment: Assignment, user: Any, step: int, value: int, **extra: Any) -> labeling.RatingResult:
    return labeling.record_rating(assignment.pk, user=user, step_index=step, rating=value, **extra)


# --- the rationale rule in the labeling service ---------------------------------------------------------------

def test_required_reason_blocks_the_submit_until_the_minus_one_has_one(lab) -> None:
    campaign, _, people, assignment = lab
    _rate(assignment, people.labeler, 0, 1)
    _rate(assignment, people.labeler, 1, -1)
    with pytest.raises(LabelingError, match=r"^Step 2 is rated −1 without a reason: this campaign requires"):
        labeling.submit_assignment(assignment.pk, user=people.labeler)
    with pytest.raises(LabelingError, match=r"^Step 2 is rated −1 without a reason"):
        labeling.finish_assignment(assignment.pk, user=people.labeler, reason="found_error")
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.LEASED
    saved = _rate(assignment, people.labeler, 1, -1, rationale="  y is 3, not 2 \t").rating
    assert saved.rationale == "y is 3, not 2"
    # Pressing −1 again (no rationale given) keeps the reason.
    assert _rate(assignment, people.labeler, 1, -1).rating.rationale == "y is 3, not 2"
    labeling.submit_assignment(assignment.pk, user=people.labeler)
    done = Assignment.objects.get(pk=assignment.pk)
    assert (done.status, done.finish_reason) == (AssignmentStatus.SUBMITTED, "found_error")


def test_optional_reason_does_not_block_and_off_refuses_one(lab, campaign_factory, member) -> None:
    campaign, _, people, assignment = lab
    campaign.step_rationale = StepRationale.OPTIONAL
    campaign.save()
    _rate(assignment, people.labeler, 0, -1)
    labeling.submit_assignment(assignment.pk, user=people.labeler)
    off = campaign_factory("no-why")
    solution_with_steps(off, STEPS)
    labeler = member(off, "off-labeler")
    lease = leases.lease_next_solution(off, labeler).assignment
    assert lease is not None
    with pytest.raises(LabelingError, match="This campaign takes no reasons on −1 steps."):
        _rate(lease, labeler, 0, -1, rationale="wrong")
    assert not Rating.objects.filter(assignment=lease).exists()  # refused as a whole


@pytest.mark.parametrize(("value", "rationale", "message"), [
    (-1, "two\nlines", "The reason must be one line: remove the line breaks."),
    (-1, "x" * 501, "The reason is too long: at most 500 characters, got 501."),
    (1, "fine", "A reason goes with a −1 rating only."),
])
def test_bad_reasons_are_refused_with_a_clear_message(lab, value, rationale, message) -> None:
    _, _, people, assignment = lab
    with pytest.raises(LabelingError) as refused:
        _rate(assignment, people.labeler, 0, value, rationale=rationale)
    assert str(refused.value) == message
    assert not Rating.objects.filter(assignment=assignment).exists()


def test_changing_the_minus_one_clears_its_reason_into_the_revision_history(lab) -> None:
    _, _, people, assignment = lab
    _rate(assignment, people.labeler, 0, -1, rationale="x is 2")
    changed = _rate(assignment, people.labeler, 0, 1).rating
    assert (changed.rating, changed.rationale) == (1, "")
    revision = RatingRevision.objects.filter(rating=changed).latest("id")
    assert (revision.previous_rating, revision.previous_rationale) == (-1, "x is 2")
    # A later −1 that removes rated steps keeps their reasons in the history too (there are none here: +1s).
    _rate(assignment, people.labeler, 1, 1)
    _rate(assignment, people.labeler, 0, -1, rationale="x is 2 after all")
    removed = RatingRevision.objects.get(assignment=assignment, removed_from_pass=True)
    assert (removed.completion.step.index, removed.previous_rating, removed.previous_rationale) == (1, 1, "")


# --- the REST API -----------------------------------------------------------------------------------------------

def test_the_api_takes_a_rationale_and_refuses_a_submit_without_one(lab) -> None:
    campaign, _, people, assignment = lab
    client, _ = token_client(people.labeler, "write")
    base = f"/api/assignments/{assignment.pk}"
    assert client.get(f"/api/campaigns/{campaign.pk}/").json()["step_rationale"] == "required"
    assert client.post(f"{base}/rate/", {"step_index": 0, "rating": -1}, format="json").status_code == 200
    refused = client.post(f"{base}/finish/", {"reason": "found_error"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith("Step 1 is rated −1 without a reason")
    two_lines = client.post(f"{base}/rate/", {"step_index": 0, "rating": -1, "rationale": "a\nb"}, format="json")
    assert two_lines.status_code == 400
    assert two_lines.json()["detail"] == "The reason must be one line: remove the line breaks."
    rated = client.post(f"{base}/rate/", {"step_index": 0, "rating": -1, "rationale": "x is 2"}, format="json")
    assert rated.status_code == 200
    assert rated.json()["ratings"] == [{"step_index": 0, "completion_index": 0, "rating": -1, "flagged": False,
                                        "rationale": "x is 2"}]
    done = client.post(f"{base}/finish/", {"reason": "found_error"}, format="json")
    assert done.status_code == 200 and done.json()["finish_reason"] == "found_error"


def test_the_api_reports_and_withdraws_a_bad_split(lab) -> None:
    campaign, solution, people, assignment = lab
    client, _ = token_client(people.labeler, "write")
    base = f"/api/assignments/{assignment.pk}"
    answer = client.post(f"{base}/bad-split/", {"step_index": 2, "note": "two steps in one"}, format="json")
    assert answer.status_code == 200
    report = SplitReport.objects.get()
    assert (report.step.index, report.note, report.assignment_id) == (2, "two steps in one", assignment.pk)
    missing = client.post(f"{base}/bad-split/", {"step_index": 9}, format="json")
    assert missing.status_code == 400 and missing.json()["detail"] == "There is no step 9."
    groups = solutions_with_split_reports(campaign.pk)
    assert [(g.solution.pk, len(g.reports)) for g in groups] == [(solution.pk, 1)]
    assert client.post(f"{base}/bad-split/", {"step_index": 2, "reported": False}, format="json").status_code == 200
    assert not SplitReport.objects.exists()


# --- the pages --------------------------------------------------------------------------------------------------

def _logged_in(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_workspace_shows_the_reason_field_on_a_minus_one_and_saves_it(lab) -> None:
    _, _, people, assignment = lab
    client = _logged_in(people.labeler)
    rate = reverse("annotate:rate", args=[assignment.pk])
    htmx = {"HTTP_HX_REQUEST": "true"}
    answer = client.post(rate, {"step_index": 0, "rating": -1}, **htmx)
    assert answer.status_code == 200 and b"data-rationale" in answer.content
    assert b"A reason is required before you submit." in answer.content
    refused = client.post(reverse("annotate:next", args=[assignment.pk]))
    assert refused.status_code == 400 and "Step 1 is rated −1 without a reason" in refused.content.decode()
    saved = client.post(rate, {"step_index": 0, "rating": -1, "rationale": "x is 2"}, **htmx)
    assert saved.status_code == 200 and "Reason: “x is 2”" in saved.content.decode()
    assert Rating.objects.get(assignment=assignment).rationale == "x is 2"
    bad = client.post(rate, {"step_index": 0, "rating": -1, "rationale": "a\r\nb"}, **htmx)
    assert bad.status_code == 400 and "one line" in bad.content.decode()
    reported = client.post(reverse("annotate:bad_split", args=[assignment.pk]), {"step_index": 0, "reported": "true"},
                           **htmx)
    assert reported.status_code == 200 and b'aria-pressed="true"' in reported.content
    assert client.post(reverse("annotate:next", args=[assignment.pk])).status_code == 302
    assert Assignment.objects.get(pk=assignment.pk).finish_reason == "found_error"


def test_the_campaign_form_sets_step_rationale(lab) -> None:
    campaign, _, people, _ = lab
    client = _logged_in(people.owner)
    page = client.get(reverse("manage:edit", args=[campaign.slug]))
    assert b'name="step_rationale"' in page.content
    form = page.context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None and name in form.fields}
    data.update(step_rationale="optional", pause_below_threshold="")
    data = {k: v for k, v in data.items() if v != ""}
    answer = client.post(reverse("manage:edit", args=[campaign.slug]), data)
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    campaign.refresh_from_db()
    assert campaign.step_rationale == "optional"
    bad = client.post(reverse("manage:edit", args=[campaign.slug]), {**data, "step_rationale": "always"})
    assert bad.status_code == 400
    assert "step_rationale must be off, optional or required, not always." in bad.content.decode()


# --- re-split ---------------------------------------------------------------------------------------------------

def test_resplit_before_any_rating_replaces_the_steps_in_place_and_releases_open_leases(lab) -> None:
    campaign, solution, people, assignment = lab
    labeling.flag_step(assignment.pk, user=people.labeler, step_index=0, flagged=True)  # a mark, not a rating
    labeling.report_bad_split(assignment_id=assignment.pk, user=people.labeler, step_index=0)
    before = Solution.objects.get(pk=solution.pk)
    assert before.label_count == 1
    outcome = resplit_solution(solution_id=solution.pk, user=people.owner,
                               steps=["First $x = 1$. Then $y = 2$.", "So $x + y = 4$.", "# Answer\n\n4"])
    assert (outcome.in_place, outcome.solution.pk, outcome.released_leases) == (True, solution.pk, 1)
    after = Solution.objects.get(pk=solution.pk)
    assert list(Completion.objects.filter(step__solution=after).order_by("step__index")
                .values_list("step__index", "text")) == [(0, "First $x = 1$. Then $y = 2$."),
                                                         (1, "So $x + y = 4$."), (2, "# Answer\n\n4")]
    assert after.content_sha256 != before.content_sha256 and after.label_count == 0
    assert not SplitReport.objects.exists() and not Rating.objects.exists()
    # The labeler whose page showed the old steps is told the lease is gone, not given a step they never saw.
    with pytest.raises(LeaseExpired):
        _rate(assignment, people.labeler, 0, 1)
    again = leases.lease_next_solution(campaign, people.owner).assignment
    assert again is not None and again.solution_id == solution.pk


def test_resplit_after_ratings_makes_a_new_solution_and_the_old_keeps_its_labels(lab, member) -> None:
    campaign, solution, people, assignment = lab
    _rate(assignment, people.labeler, 0, 1)
    new_steps = ["First $x = 1$.", "Then $y = 2$. So $x + y = 4$.", "# Answer\n\n4"]
    outcome = resplit_solution(solution_id=solution.pk, user=people.staff, steps=new_steps)
    assert not outcome.in_place
    new, old = outcome.solution, Solution.objects.get(pk=solution.pk)
    assert new.provenance["resplit_from"] == old.pk and old.provenance["resplit_into"] == new.pk
    assert (new.problem_id, new.campaign_id, new.generation, new.label_count) == (old.problem_id, campaign.pk,
                                                                                  old.generation, 0)
    assert list(Completion.objects.filter(step__solution=new).order_by("step__index")
                .values_list("text", flat=True)) == new_steps
    assert list(Completion.objects.filter(step__solution=old).order_by("step__index")
                .values_list("text", flat=True)) == STEPS
    assert Rating.objects.get(assignment=assignment).rating == 1  # the open pass on the old steps goes on
    _rate(assignment, people.labeler, 1, -1, rationale="y is 3")
    labeling.submit_assignment(assignment.pk, user=people.labeler)
    other = member(campaign, "second-labeler")
    lease = leases.lease_next_solution(campaign, other).assignment
    assert lease is not None and lease.solution_id == new.pk  # the old solution takes no new work
    with pytest.raises(ResplitError, match=f"already re-split into solution {new.pk}"):
        resplit_solution(solution_id=old.pk, user=people.owner, steps=["One."])


@pytest.mark.parametrize(("who", "steps", "message"), [
    ("researcher", ["One."], "Only the campaign's admins and staff can re-split its solutions."),
    ("other_admin", ["One."], "Only the campaign's admins and staff can re-split its solutions."),
    ("owner", [], "Give at least one step."),
    ("owner", ["One.", "  "], "Step 2 is empty."),
    ("owner", STEPS, "These are the solution's steps as they are: nothing to re-split."),
])
def test_resplit_refusals(lab, who, steps, message) -> None:
    _, solution, people, _ = lab
    with pytest.raises(ResplitError) as refused:
        resplit_solution(solution_id=solution.pk, user=people[who], steps=steps)
    assert str(refused.value) == message
    assert list(Completion.objects.filter(step__solution=solution).order_by("step__index")
                .values_list("text", flat=True)) == STEPS


def test_steps_from_text_splits_on_blank_lines() -> None:
    assert steps_from_text("One.\r\n\r\nTwo,\nstill two.\n\n\n  \n# Answer\n\n4\n") == [
        "One.", "Two,\nstill two.", "# Answer", "4"]


def test_the_resplit_page_lists_reports_and_saves_steps(lab) -> None:
    campaign, solution, people, assignment = lab
    labeling.report_bad_split(assignment_id=assignment.pk, user=people.labeler, step_index=1, note="cut in half")
    client = _logged_in(people.owner)
    listing = client.get(reverse("manage:split_reports", args=[campaign.slug]))
    assert listing.status_code == 200
    text = listing.content.decode()
    assert f'data-split-report="{solution.pk}"' in text and "cut in half" in text
    url = reverse("manage:resplit", args=[campaign.slug, solution.pk])
    assert url in text
    assert url in client.get(reverse("manage:review", args=[campaign.slug, solution.pk])).content.decode()
    empty = client.post(url, {"steps": "\n\n"})
    assert empty.status_code == 400 and "Give at least one step." in empty.content.decode()
    saved = client.post(url, {"steps": "A.\n\nB.\n\n# Answer\n\n4"})
    assert saved.status_code == 302 and saved["Location"] == url  # no ratings: the same solution, in place
    assert list(Completion.objects.filter(step__solution=solution).order_by("step__index")
                .values_list("text", flat=True)) == ["A.", "B.", "# Answer", "4"]
    assert _logged_in(people.researcher).get(url).status_code == 403


# --- exports and the import round trip -------------------------------------------------------------------------

def _labeled(lab: Any) -> tuple[Any, Assignment]:
    campaign, _, people, assignment = lab
    _rate(assignment, people.labeler, 0, 1)
    _rate(assignment, people.labeler, 1, -1, rationale="y is 3, not 2")
    labeling.submit_assignment(assignment.pk, user=people.labeler)
    return campaign, assignment


def test_prm800k_export_carries_the_rationale_and_the_import_reads_it_back(lab, campaign_factory,
                                                                           tmp_path: Path) -> None:
    campaign, assignment = _labeled(lab)
    rows = list(iter_prm800k_rows(Assignment.objects.filter(pk=assignment.pk)))
    steps = rows[0]["label"]["steps"]
    assert steps[0]["completions"][0] == {"text": STEPS[0], "rating": 1, "flagged": False}  # no empty key
    assert steps[1]["completions"][0] == {"text": STEPS[1], "rating": -1, "flagged": False,
                                          "rationale": "y is 3, not 2"}
    path = tmp_path / "why.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    copy = campaign_factory("why-copy")
    report = import_prm800k(path, copy)
    assert report.imported == 1
    imported = Rating.objects.filter(assignment__solution__campaign=copy).order_by("completion__step__index")
    assert list(imported.values_list("rating", "rationale")) == [(1, ""), (-1, "y is 3, not 2")]
    again = list(iter_prm800k_rows(Assignment.objects.filter(solution__campaign=copy)))
    assert json.dumps(again[0]["label"]) == json.dumps(rows[0]["label"])


@pytest.mark.parametrize(("completion", "field", "message"), [
    ({"text": "A.", "rating": 1, "flagged": None, "rationale": "why"}, "rationale", "a rationale goes with a −1"),
    ({"text": "A.", "rating": -1, "flagged": None, "rationale": "a\nb"}, "rationale", "must be one line"),
    ({"text": "A.", "rating": -1, "flagged": None, "rationale": 3}, "rationale", "string"),
])
def test_the_importer_refuses_a_bad_rationale_naming_line_and_field(campaign_factory, tmp_path: Path, completion,
                                                                     field, message) -> None:
    row = {"labeler": "l1", "timestamp": "2022-01-01T00:00:00", "generation": 1,
           "is_quality_control_question": False, "is_initial_screening_question": False,
           "question": {"problem": "What is 1+1?", "ground_truth_answer": "2"},
           "label": {"steps": [{"completions": [completion], "human_completion": None, "chosen_completion": None}],
                     "total_time": 1, "finish_reason": "found_error"}}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    report = import_prm800k(path, campaign_factory("bad-why"), skip_invalid=True)
    assert report.imported == 0
    rejected = report.as_dict()["rejected"][0]
    assert rejected["line"] == 1 and rejected["field"] == f"label.steps[0].completions[0].{field}"
    assert message in rejected["message"]


def test_trl_stepwise_rows_carry_rationales_beside_the_steps(lab) -> None:
    campaign, assignment = _labeled(lab)
    rows = list(iter_stepwise_rows(Assignment.objects.filter(pk=assignment.pk), ExportOptions()))
    assert [(r["completions"], r["labels"], r["rationales"]) for r in rows] == [
        (STEPS[:2], [True, False], [None, "y is 3, not 2"])]


def test_a_labeler_elsewhere_cannot_report_on_someone_elses_pass(lab, member) -> None:
    campaign, _, _, assignment = lab
    stranger = member(campaign, "stranger")
    with pytest.raises(NotAllowed):
        labeling.report_bad_split(assignment_id=assignment.pk, user=stranger, step_index=0)
    assert not SplitReport.objects.exists()

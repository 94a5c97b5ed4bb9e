"""A custom 4-value scale and the binary scale end to end: the campaign form, rating with stop-at-first-error on
the scale's error values, error categories, agreement, adjudication, exports and the training node's rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from annotate.models import Assignment, Campaign, Rating
from annotate.services import adjudication, agreement
from annotate.services.campaigns import CampaignAdminError, update_campaign
from annotate.services.errors import LabelingError
from annotate.services.labeling import record_rating, submit_assignment
from annotate.services.leases import lease_next_solution
from rewards.exports import ExportOptions, iter_format_rows
from rewards.training.data import parse_prm_record
from tests.factories import PASSWORD, solution_with_steps

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
FOUR = {"name": "four", "values": [
    {"value": -2, "label": "Wrong", "key": "q", "colour": "#c62828", "is_error": True, "positive": False},
    {"value": -1, "label": "Doubtful", "key": "w", "colour": "#ef6c00", "is_error": False, "positive": False},
    {"value": 1, "label": "Fine", "key": "e", "colour": "#9e9e9e", "is_error": False, "positive": None},
    {"value": 2, "label": "Strong", "key": "r", "colour": "#2e7d32", "is_error": False, "positive": True},
]}
STEPS = ["The contract needs an offer.", "An advertisement is an invitation to treat.", "So no offer was made.",
         "The answer is (B)."]


def login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def _new_campaign(make_user, slug: str, scale: str, categories: str = "") -> Campaign:
    boss = make_user(f"boss-{slug}", is_staff=True)
    response = login(boss).post("/manage/new", {
        "name": slug, "slug": slug, "mode": "stepwise", "overlap": 2, "qc_rate": 0, "screening_pass_threshold": 70,
        "lease_minutes": 30, "export_interval_minutes": 0, "quality_threshold": 60, "quality_min_items": 5,
        "step_scale": scale, "error_categories": categories, "grader": "multiple_choice", "step_rule": "sentence"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    return Campaign.objects.get(slug=slug)


def _label(campaign: Campaign, user, values: list[int], *, category: str | None = None) -> Assignment:
    assignment = lease_next_solution(campaign, user).assignment
    assert assignment is not None
    for index, value in enumerate(values):
        record_rating(assignment.pk, user=user, step_index=index, rating=value,
                      error_category=category if value == values[-1] and category else None)
    submit_assignment(assignment.pk, user=user)
    return assignment


def test_campaign_form_refuses_a_bad_scale_naming_the_field(make_user) -> None:
    boss = make_user("boss", is_staff=True)
    bad = {**FOUR, "values": FOUR["values"][:1]}
    response = login(boss).post("/manage/new", {"name": "x", "slug": "x", "mode": "stepwise", "overlap": 1,
                                                "qc_rate": 0, "screening_pass_threshold": 70, "lease_minutes": 30,
                                                "export_interval_minutes": 0, "quality_threshold": 60,
                                                "quality_min_items": 5, "step_scale": json.dumps(bad)})
    assert response.status_code == 400
    assert "scale.values: must list 2 to 5 values" in response.content.decode()
    assert not Campaign.objects.filter(slug="x").exists()


def test_a_custom_four_value_scale_end_to_end(make_user, member, settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STEPLAB_EXPORT_TMP_DIR = tmp_path / "tmp"
    campaign = _new_campaign(make_user, "four", json.dumps(FOUR), "factual error, invalid inference")
    assert campaign.step_scale["name"] == "four" and campaign.error_categories == ["factual error",
                                                                                   "invalid inference"]
    assert (campaign.grader, campaign.step_rule) == ("multiple_choice", "sentence")
    solution = solution_with_steps(campaign, STEPS, answer="B")
    ann, bob = member(campaign, "ann"), member(campaign, "bob")

    # the workspace shows the scale's values with their keys and colours
    client = login(ann)
    started = client.post("/c/four/start")
    assignment = Assignment.objects.get(labeler=ann)
    page = client.get(started["Location"]).content.decode()
    assert 'data-scale="four"' in page and 'data-error-values="-2"' in page
    assert 'data-key="q"' in page and "--rate-colour: #2e7d32" in page and ">Doubtful<" in page
    # a PRM800K value is not on this scale; -1 here is "Doubtful", not an error: the pass goes on after it
    bad = client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 0, "rating": 0}, **HX)
    assert bad.status_code == 400 and "rating must be -2, -1, 1 or 2, not 0." in bad.content.decode()
    for index, value in enumerate((2, -1, 1)):
        assert client.post(f"/assignments/{assignment.pk}/rate", {"step_index": index, "rating": value},
                           **HX).status_code == 200
    # -2 is the error: it takes the later steps out of the pass, and takes an error category
    response = client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 1, "rating": -2}, **HX)
    body = response.content.decode()
    assert response.status_code == 200 and "is-error" in body and 'data-error-categories' in body
    assert not Rating.objects.filter(assignment=assignment, completion__step__index=2).exists()
    after = client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 2, "rating": 2}, **HX)
    assert after.status_code == 400 and "nothing after the first error" in after.content.decode()
    chosen = client.post(f"/assignments/{assignment.pk}/rate",
                         {"step_index": 1, "rating": -2, "error_category": "invalid inference"}, **HX)
    assert chosen.status_code == 200 and "Error: invalid inference." in chosen.content.decode()
    with pytest.raises(LabelingError, match="not an error category"):
        record_rating(assignment.pk, user=ann, step_index=1, rating=-2, error_category="astrology")
    submit_assignment(assignment.pk, user=ann)
    assignment.refresh_from_db()
    assert assignment.finish_reason == "found_error"
    _label(campaign, bob, [2, -2], category="factual error")

    # agreement reads first errors on the scale's error values and alpha over its four values
    data = agreement.load_labelings(campaign)
    assert {item.first_error for item in data.labelings} == {1}
    figures = agreement.inter_annotator_agreement(data.labelings, (-2, -1, 1, 2))
    assert figures.first_error_exact.value == 1.0 and figures.alpha_ordinal.items == 2

    # adjudication takes the scale's values only
    boss = make_user("reviewer")
    with pytest.raises(CampaignAdminError, match="must be -2, -1, 1 or 2"):
        adjudication.set_resolved_label(solution, 0, 0, boss)
    adjudication.set_resolved_label(solution, 0, 2, boss)
    adjudication.set_resolved_label(solution, 1, -2, boss)

    # exports: labels as the scale says (-2 and -1 negative, 1 neutral under the policy, 2 positive)
    rows = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions(neutral="negative")))
    assert {tuple(row["ratings"]) for row in rows} == {(2, -2)}
    assert all(row["labels"] == [True, False] for row in rows)
    resolved = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions(labels="resolved")))
    assert resolved[0]["ratings"] == [2, -2] and resolved[0]["labels"] == [True, False]
    # the training node reads the same rows with the scale as plain data
    label_map = {-2: False, -1: False, 1: None, 2: True}
    parsed = parse_prm_record("row 1", rows[0], "exclude", label_map)
    assert parsed.labels == (1, 0)
    assert parse_prm_record("row", {**rows[0], "ratings": [1, -1]}, "exclude", label_map).labels == (-100, 0)

    # the dataset card records the domain
    from rewards.services.datasets import create_dataset_version

    version = create_dataset_version(campaign)
    assert version is not None
    card = (Path(settings.MEDIA_ROOT) / version.file_name("card")).read_text()
    assert "Step label scale `four`" in card and "| -2 | Wrong | yes | false |" in card
    assert "Outcome grader: `multiple_choice`" in card and "Step rule: `sentence`" in card
    assert "factual error, invalid inference" in card

    # a scale that would strand given ratings is refused
    with pytest.raises(CampaignAdminError, match="holds ratings of"):
        update_campaign(campaign=campaign, step_scale={"name": "binary"})


def test_the_binary_scale_end_to_end(make_user, member) -> None:
    campaign = _new_campaign(make_user, "yesno", "binary")
    assert campaign.step_scale == {"name": "binary"}
    solution_with_steps(campaign, STEPS, answer="B")
    ann, bob = member(campaign, "ann"), member(campaign, "bob")
    client = login(ann)
    client.post("/c/yesno/start")
    assignment = Assignment.objects.get(labeler=ann)
    page = client.get(f"/assignments/{assignment.pk}/").content.decode()
    assert ">Incorrect<" in page and ">Correct<" in page and 'data-rating="0"' not in page
    zero = client.post(f"/assignments/{assignment.pk}/rate", {"step_index": 0, "rating": 0}, **HX)
    assert zero.status_code == 400 and "rating must be -1 or 1, not 0." in zero.content.decode()
    for index in range(len(STEPS)):
        assert client.post(f"/assignments/{assignment.pk}/rate", {"step_index": index, "rating": 1},
                           **HX).status_code == 200
    submit_assignment(assignment.pk, user=ann)
    _label(campaign, bob, [1, 1, -1])
    data = agreement.load_labelings(campaign)
    assert sorted(item.first_error for item in data.labelings) == [-1, 2]
    rows = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions(neutral="exclude")))
    assert sorted(row["labels"] for row in rows) == [[True, True, False], [True, True, True, True]]


def test_dashboard_counts_results_per_domain_and_error_categories(make_user, member, client) -> None:
    from annotate.services.agreement import compute_campaign_metrics
    from tests.factories import finished_labeling

    campaign = _new_campaign(make_user, "multi", "binary", "factual error, invalid inference")
    law = solution_with_steps(campaign, STEPS, problem_text="A law question?", answer="B")
    health = solution_with_steps(campaign, STEPS[:2], problem_text="A health question?", answer="A")
    law.problem.subject, health.problem.subject = "law", "health"
    law.problem.save()
    health.problem.save()
    type(law).objects.filter(pk=law.pk).update(is_correct=True)
    type(health).objects.filter(pk=health.pk).update(is_correct=False)
    ann = member(campaign, "ann")
    labeling = finished_labeling(law, ann, [1, -1])
    Rating.objects.filter(assignment=labeling, rating=-1).update(error_category="factual error")
    compute_campaign_metrics(campaign)
    client.force_login(make_user("boss", is_staff=True))
    page = client.get(f"/manage/c/{campaign.slug}/").content.decode()
    assert '<tr data-domain="law"><th>law</th><td>1</td>' in page
    assert '<td data-correct>1</td><td data-wrong>0</td>' in page and '<td data-error-steps>1</td>' in page
    assert '<li data-error-category="factual error">factual error: 1</li>' in page
    assert '<li data-error-category="invalid inference">invalid inference: 0</li>' in page


def test_error_categories_travel_in_the_trl_stepwise_rows(campaign_factory, member) -> None:
    """The category a labeler named on an error step is exported beside its rationale (the PRM800K rows leave it
    out: they stay the release's shape byte for byte)."""
    campaign = campaign_factory("cats", error_categories=["calculation", "factual error"])
    solution_with_steps(campaign, STEPS, answer="B")
    _label(campaign, member(campaign, "ann"), [1, -1], category="calculation")
    [row] = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions()))
    assert row["ratings"] == [1, -1] and row["error_categories"] == [None, "calculation"]
    [prm800k] = list(iter_format_rows(campaign, "prm800k", ExportOptions()))
    assert all("error_category" not in completion
               for step in prm800k["label"]["steps"] for completion in step["completions"] or [])

"""Other domains in real headless Chromium: the human grader's final-answer rating on a real MMLU-Pro response,
and a custom scale's own keys, error value and error-category key."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from annotate.models import Assignment, Rating, Solution
from annotate.services.problems import import_problems, import_solutions
from tests.domains.test_scales_end_to_end import FOUR
from tests.labeling.test_browser import log_in, row, start_labeling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_human_grader_labeler_rates_the_final_answer_in_the_workspace(
        page: Page, live_server, campaign_factory, member, shared_data: Path, tmp_path: Path) -> None:
    campaign = campaign_factory("essay", grader="human", step_rule="sentence")
    with (shared_data / "mmlu-pro/questions.jsonl").open(encoding="utf-8") as handle:
        question = json.loads(handle.readline())
    with (shared_data / "mmlu-pro/responses.jsonl").open(encoding="utf-8") as handle:
        response = next(row for row in map(json.loads, handle) if row["question_id"] == question["question_id"])
    # no ground truth: the answer is left out, as a human-graded campaign's rows come
    (tmp_path / "q.jsonl").write_text(json.dumps({k: v for k, v in question.items() if k != "answer"}) + "\n")
    (tmp_path / "r.jsonl").write_text(json.dumps(response) + "\n")
    import_problems(tmp_path / "q.jsonl", campaign)
    import_solutions(tmp_path / "r.jsonl", campaign)
    solution = Solution.objects.get()
    assert solution.is_correct is None and solution.steps.count() >= 2
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "essay")
    expect(page.locator("[data-options] li")).to_have_count(len(question["options"]))
    for index in range(solution.steps.count()):
        page.keyboard.press("3")
        expect(row(page, index).locator('button[data-rating="1"]')).to_have_attribute("aria-pressed", "true")
    # submitting before the final answer is rated is refused, saying why
    page.click('[data-action="next"]')
    expect(page.locator("body")).to_contain_text("Rate the final answer first")
    assert Assignment.objects.get().status == "leased"
    outcome = page.locator("#outcome")
    expect(outcome).to_contain_text(solution.final_answer or "")
    outcome.locator('button[data-outcome-choice="false"]').click()
    expect(page.locator("#outcome")).to_have_attribute("data-outcome", "incorrect")
    page.click('[data-action="next"]')
    expect(page.locator(".messages")).to_contain_text("No work left")
    solution.refresh_from_db()
    assert solution.is_correct is False and Assignment.objects.get().outcome_correct is False


def test_custom_scale_keys_error_value_and_error_category(
        page: Page, live_server, campaign_factory, member) -> None:
    from tests.factories import solution_with_steps

    campaign = campaign_factory("four", step_scale=FOUR, error_categories=["factual error", "invalid inference"])
    solution_with_steps(campaign, ["An offer was made.", "Silence is acceptance.", "So there is a contract.",
                                   "The answer is (B)."], answer="B")
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "four")
    page.keyboard.press("r")  # Strong (+2)
    expect(row(page, 0).locator('button[data-rating="2"]')).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("3")  # not a key of this scale: nothing is rated
    page.keyboard.press("w")  # Doubtful (−1): not an error here, the pass goes on
    expect(row(page, 1).locator('button[data-rating="-1"]')).to_have_attribute("aria-pressed", "true")
    expect(row(page, 2).locator('button[data-rating="2"]')).to_be_enabled()
    page.keyboard.press("q")  # Wrong (−2): the error
    expect(row(page, 2)).to_have_class(re.compile(r"\bis-error\b"))
    page.keyboard.press("2")  # the key right after the error names its category
    expect(row(page, 2).locator('button[data-error-category="invalid inference"]')).to_have_attribute(
        "aria-pressed", "true")
    expect(row(page, 3).locator('button[data-rating="2"]')).to_be_disabled()
    ratings = dict(Rating.objects.values_list("completion__step__index", "rating"))
    assert ratings == {0: 2, 1: -1, 2: -2}
    assert Rating.objects.get(completion__step__index=2).error_category == "invalid inference"

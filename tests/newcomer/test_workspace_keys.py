"""The workspace as a newcomer meets it, in real headless Chromium: after a −1 the rating keys go on rating (the
labeling docs' promise) while the error categories answer letters of their own; the keyboard help is a list, one
shortcut a line; the problem's answer reads "Reference answer", and a multiple-choice letter is text, not math."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from annotate.models import Rating
from tests.factories import ProblemFactory, SolutionFactory, solution_with_steps
from tests.labeling.test_browser import log_in, pressed, row, start_labeling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "newcomer"


def test_rating_keys_keep_rating_after_an_error_and_categories_take_letters(
        page: Page, live_server, campaign_factory, member) -> None:
    campaign = campaign_factory("keys", error_categories=["calculation", "misread the question"])
    solution_with_steps(campaign, ["First, $2+2=4$.", "Then $4 \\times 3 = 13$.", "So $13$.", "Done."], answer="12")
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "keys")
    expect(page.locator("[data-reference-answer]")).to_contain_text("Reference answer:")
    expect(page.locator("[data-reference-answer] .katex")).to_have_count(1)  # a math answer stays math
    expect(page.locator("body")).not_to_contain_text("Current guess")

    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("1")
    expect(row(page, 1)).to_have_class(re.compile(r"\bis-error\b"))
    categories = row(page, 1).locator("button[data-error-category]")
    expect(categories).to_have_count(2)
    assert [categories.nth(i).get_attribute("data-key") for i in range(2)] == ["q", "w"]
    # A rating key right after the −1 changes that rating, as docs/labeling.md says: it does not name a category.
    page.keyboard.press("2")
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    expect(pressed(page, 2, "1")).to_be_enabled()
    assert Rating.objects.get(completion__step__index=1).error_category == ""
    page.keyboard.press("k")  # the focus moved on to step 3 with the 0: back to step 2, and −1 again
    page.keyboard.press("1")
    expect(pressed(page, 1, "-1")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("w")
    expect(row(page, 1).locator('button[data-error-category="misread the question"]')).to_have_attribute(
        "aria-pressed", "true")
    rating = Rating.objects.get(completion__step__index=1)
    assert (rating.rating, rating.error_category) == (-1, "misread the question")
    page.keyboard.press("q")  # another letter, another kind; the −1 stays
    expect(row(page, 1).locator('button[data-error-category="calculation"]')).to_have_attribute(
        "aria-pressed", "true")
    assert Rating.objects.get(completion__step__index=1).error_category == "calculation"

    # The help: one shortcut a line, keys in one column; the categories' letters listed.
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "keyboard-help.png"))
    # The title above the list, the list above the note and the Close button: a column, not a row.
    title, listing = dialog.locator("h2").bounding_box(), dialog.locator("dl[data-shortcuts]").bounding_box()
    close = dialog.get_by_role("button", name="Close").bounding_box()
    assert title["y"] + title["height"] <= listing["y"] + 1 and listing["y"] + listing["height"] <= close["y"] + 1
    items = dialog.locator("dl[data-shortcuts] > div")
    assert items.count() >= 9
    boxes = [items.nth(i).bounding_box() for i in range(items.count())]
    keys = [items.nth(i).locator("dt").bounding_box() for i in range(items.count())]
    words = [items.nth(i).locator("dd").bounding_box() for i in range(items.count())]
    assert all(later["y"] >= earlier["y"] + earlier["height"] - 1
               for earlier, later in zip(boxes, boxes[1:], strict=False))
    assert len({round(box["x"]) for box in keys}) == 1 and len({round(box["x"]) for box in words}) == 1
    assert all(word["x"] > key["x"] + key["width"] - 1 for key, word in zip(keys, words, strict=True))
    expect(dialog).to_contain_text("kind of error: misread the question")
    expect(dialog.locator("dt", has_text=re.compile(r"^w$"))).to_have_count(1)


def test_a_multiple_choice_letter_is_text_not_math(page: Page, live_server, campaign_factory, member) -> None:
    campaign = campaign_factory("choice", grader="multiple_choice")
    problem = ProblemFactory(text="Which is a prime number?", answer="B", options=["4", "5", "6", "8"])
    SolutionFactory(campaign=campaign, problem=problem, steps=["5 has no divisor but 1 and 5.", "The answer is (B)."])
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "choice")
    answer = page.locator("[data-reference-answer]")
    expect(answer).to_have_text("Reference answer: B")
    expect(answer.locator(".katex")).to_have_count(0)
    expect(page.locator("[data-options] li")).to_have_count(4)

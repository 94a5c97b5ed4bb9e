"""A −1's reason and the "bad split" key in real headless Chromium, keyboard only, in a campaign that requires
reasons: the refusal without one, then the reason typed and the pass submitted."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from annotate.models import Assignment, AssignmentStatus, Rating, SplitReport, StepRationale
from tests.factories import solution_with_steps

from .test_browser import log_in, pressed, row, start_labeling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def why(campaign_factory, member):
    campaign = campaign_factory("why", name="Why", step_rationale=StepRationale.REQUIRED)
    for copy in range(2):
        solution_with_steps(campaign, ["We have $x = 1$.", "Then $y = 2$.", "So $x + y = 3$."],
                            problem_text=f"If $x = 1$ and $y = 2$, what is $x + y$? (copy {copy})", answer="3")
    member(campaign, "ann")
    return campaign


def test_a_minus_one_takes_its_reason_by_keyboard_and_required_mode_refuses_without(
        page: Page, live_server, why) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "why")
    first = Assignment.objects.get(labeler__username="ann")
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("1")  # step 2 is wrong: the focus moves into its reason field
    reason = row(page, 1).locator("input[data-rationale]")
    expect(reason).to_be_focused()
    page.keyboard.press("Enter")  # saved empty: the keys go back to rating, Submit is next
    submit = page.locator('[data-action="next"]')
    expect(submit).to_be_focused()
    page.keyboard.press("Enter")  # refused: the reason is required, and the page names the step
    expect(page.locator("#alerts")).to_contain_text("Step 2 is rated −1 without a reason")
    expect(page.locator("#workspace")).to_have_attribute("data-keyboard-ready", "true")
    assert Assignment.objects.get(pk=first.pk).status == AssignmentStatus.LEASED
    page.keyboard.press("1")  # the −1 again (it stays): back into its reason field
    expect(reason).to_be_focused()
    page.keyboard.type("y is 2, so x + y is 3: this step is right, the sum is wrong")
    page.keyboard.press("Escape")  # not saved: back to rating
    expect(reason).not_to_be_focused()
    page.keyboard.press("1")
    expect(reason).to_be_focused()
    reason.fill("")
    page.keyboard.type("y is 2 is fine; a typo in the problem")
    page.keyboard.press("Enter")
    expect(page.locator("#announce")).to_contain_text("Reason: “y is 2 is fine; a typo in the problem”")
    expect(page.locator('[data-action="next"]')).to_be_focused()
    page.keyboard.press("s")  # and its boundaries look wrong too
    expect(row(page, 1).locator("button[data-bad-split]")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/assignments/\d+/$"))
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(first.pk))
    first.refresh_from_db()
    assert (first.status, first.finish_reason) == (AssignmentStatus.SUBMITTED, "found_error")
    assert list(Rating.objects.filter(assignment=first).order_by("completion__step__index")
                .values_list("rating", "rationale")) == [(1, ""), (-1, "y is 2 is fine; a typo in the problem")]
    assert list(SplitReport.objects.values_list("assignment_id", "step__index")) == [(first.pk, 1)]

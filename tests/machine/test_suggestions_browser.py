"""Machine labels in the workspace, in real headless Chromium: hidden by default, revealed after rating, or shown;
never on a gold solution."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from annotate.models import Rating, SuggestionMode
from annotate.services.machine_labels import StepValue, record_machine_labels
from tests.factories import numbered_solution
from tests.labeling.test_browser import log_in, pressed, row, start_labeling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def labeled_campaign(campaign_factory, member, mode: str, **fields):
    campaign = campaign_factory("assist", name="Assist", suggestions=mode, **fields)
    solution = numbered_solution(campaign, 3, **({"is_quality_control": True, "gold_first_error": -1}
                                                 if fields.get("qc_rate") else {}))
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.75, 4), StepValue(1, 0.0, 4)]}, kind="mc",
                          source="smollm2")
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.9)]}, kind="prm", source="prm-1")
    member(campaign, "ann")
    return campaign


def test_hidden_by_default(page: Page, live_server, campaign_factory, member) -> None:
    campaign = labeled_campaign(campaign_factory, member, SuggestionMode.HIDDEN)
    assert campaign._meta.get_field("suggestions").default == SuggestionMode.HIDDEN
    log_in(page, live_server.url, "ann")
    start_labeling(page, "assist")
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("[data-machine-labels]")).to_have_count(0)
    assert Rating.objects.get().suggestions_seen == "none"


def test_revealed_after_the_labeler_rates_the_step(page: Page, live_server, campaign_factory, member) -> None:
    labeled_campaign(campaign_factory, member, SuggestionMode.AFTER_RATING)
    log_in(page, live_server.url, "ann")
    start_labeling(page, "assist")
    expect(page.locator("[data-machine-labels]")).to_have_count(0)
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    labels = row(page, 0).locator("[data-machine-labels]")
    expect(labels.locator('[data-source="mc:smollm2"]')).to_have_text("mc:smollm2: 0.75")
    expect(labels.locator('[data-source="prm:prm-1"]')).to_have_text("prm:prm-1: 0.90")
    expect(row(page, 1).locator("[data-machine-labels]")).to_have_count(0)  # step 2 is not rated yet
    assert Rating.objects.get().suggestions_seen == "after"


def test_shown_before_rating(page: Page, live_server, campaign_factory, member) -> None:
    labeled_campaign(campaign_factory, member, SuggestionMode.SHOWN)
    log_in(page, live_server.url, "ann")
    start_labeling(page, "assist")
    expect(row(page, 0).locator('[data-source="mc:smollm2"]')).to_have_text("mc:smollm2: 0.75")
    expect(row(page, 1).locator('[data-source="mc:smollm2"]')).to_have_class("machine-label is-bad")
    expect(row(page, 2).locator("[data-machine-labels]")).to_have_count(0)  # no source labels step 3
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    assert Rating.objects.get().suggestions_seen == "before"


def test_never_on_a_gold_solution(page: Page, live_server, campaign_factory, member) -> None:
    labeled_campaign(campaign_factory, member, SuggestionMode.SHOWN, qc_rate=1.0)
    log_in(page, live_server.url, "ann")
    start_labeling(page, "assist")
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("[data-machine-labels]")).to_have_count(0)
    assert Rating.objects.get().suggestions_seen == "none"

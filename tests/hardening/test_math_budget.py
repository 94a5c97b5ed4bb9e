"""The math a page renders is capped per page, not only per span: a step of 2,000 macro-defining spans renders its
first spans and shows the rest as escaped text with a note, instead of holding the browser for a minute."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest
from django.test import Client
from playwright.sync_api import Browser

from annotate.models import Role
from tests.factories import MembershipFactory, solution_with_steps

NESTED_DEFS = r"$\def\a{\b\b}\def\b{\c\c}\def\c{\d\d}\def\d{x} \a$ "


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}


def _open(browser: Browser, live_server: Any, user: Any, path: str) -> Any:
    client = Client()
    client.force_login(user)
    context = browser.new_context(base_url=live_server.url)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                          "domain": urlparse(live_server.url).hostname, "path": "/"}])
    page = context.new_page()
    page.goto(path)
    page.wait_for_load_state("load")
    return page


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("step, spent", [(NESTED_DEFS * 2000, True), (r"$x^2 + \frac{1}{2}$ " * 200, False)])
def test_a_page_renders_math_within_its_budget(browser: Browser, live_server: Any, campaign_factory, make_user,
                                                step: str, spent: bool) -> None:
    campaign = campaign_factory("budget", name="Budget")
    admin = make_user("budget_admin")
    MembershipFactory(campaign=campaign, user=admin, role=Role.ADMIN)
    solution = solution_with_steps(campaign, [step.strip(), "The answer is $2$."])
    page = _open(browser, live_server, admin, f"/manage/c/{campaign.slug}/solutions/{solution.pk}/resplit")
    rendered = page.locator("[data-current-steps] .katex").count()
    fallback = page.locator("[data-current-steps] .math-fallback").count()
    assert (page.locator("body").get_attribute("data-math-budget-spent") == "true") is spent
    if spent:
        assert 0 < rendered < 2000 and fallback >= 1000, (rendered, fallback)
        note = page.locator("[data-current-steps] .math-note").last.inner_text()
        assert "more math than is displayed at once" in note
        assert page.locator("[data-current-steps] .math-too-long").first.inner_text().startswith(r"$\def\a")
    else:
        assert rendered == 201 and fallback == 0

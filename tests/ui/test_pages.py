"""Every page of the site, as each role would see it, at desktop (1280 px) and phone (390 px) width, in real
headless Chromium.

The list of pages comes from the URL conf through the access matrix's rules (tests/hardening): every GET URL
is a page unless NOT_PAGES says why not, and a role visits the pages its rule lets through. On each page:
the site's nav is there, nothing scrolls sideways, no link sends the role to a 403/404 (or a 500), no
LaTeX is left as raw text where math belongs, and no image/style/script of the page is missing. A
screenshot of each page is kept as test-artifacts/screenshots/<page>--<role>--<width>.png.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlparse

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Browser, BrowserContext, Page

from annotate.models import Campaign, Completion, Step
from annotate.services.agreement import compute_campaign_metrics
from tests.factories import CompletionFactory, StepFactory
from tests.hardening.test_access_matrix import ROLES, RULES, World, world  # noqa: F401  (world is a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
WIDTHS = (1280, 390)
# The roles of the brief: the matrix's "labeler of another campaign" adds nothing a page would show.
VISITORS = ("anonymous", "labeler_in", "researcher", "admin", "staff")
ROLE_NAMES = {"labeler_in": "labeler", "admin": "campaign-admin"}

NOT_PAGES = {
    "annotate:healthz": "plain-text health check",
    "manage:import_progress": "htmx fragment polled by the import page",
    "jobs:job_progress": "htmx fragment polled by the job page",
    "jobs:scoring_job_progress": "htmx fragment polled by the scoring job page",
    "jobs:sampling_job_progress": "htmx fragment polled by the sampling job page",
    "jobs:machine-labels_job_progress": "htmx fragment polled by the machine labeling job page",
    "jobs:llm-judge_job_progress": "htmx fragment polled by the LLM judge job page",
    "jobs:comparison_progress": "htmx fragment polled by the campaign dashboard's comparison section",
    "jobs:figure": "CSV/JSON download",
    "jobs:campaign_figure": "CSV/JSON download",
    "api:schema": "OpenAPI document",
    "api:docs": "Swagger UI, the API's own page (its CSP is relaxed for it)",
}


def _is_page(name: str) -> bool:
    """API endpoints (DRF and /models/api/) answer JSON; the rest of the GET URLs are pages."""
    if name in NOT_PAGES:
        return False
    return not name.startswith(("api:", "jobs:api_"))


PAGES = sorted(name for name, rule in RULES.items() if rule.method == "get" and _is_page(name))

# Raw LaTeX left in the page's text: $…$ with something inside, or a command KaTeX would have rendered.
RAW_MATH = re.compile(r"\$[^$\s][^$]*\$|\\(?:d?frac|boxed|sqrt|theta|pi|times)\b")
RAW_TEXT_JS = """() => {
  const skip = "script, style, code, pre, textarea, kbd, .katex";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) {
    const parent = walker.currentNode.parentElement;
    if (parent && !parent.closest(skip) && walker.currentNode.textContent.trim()) {
      texts.push(walker.currentNode.textContent);
    }
  }
  return texts;
}"""


@pytest.fixture
def site(world: World) -> World:  # noqa: F811  (the matrix's world, given math to render and metrics)
    """The access matrix's world, with math in every place an admin or labeler reads it."""
    campaign = world.a
    campaign.instructions = "Rate each step. A half is $\\frac{1}{2}$; see **the rules**."
    campaign.save(update_fields=["instructions"])
    world.problem.text = "What is $\\frac{1}{2} + \\frac{1}{2}$?"
    world.problem.answer = "1"
    world.problem.save(update_fields=["text", "answer"])
    Completion.objects.filter(step__solution=world.solution, step__index=0).update(
        text="Add the halves: $\\frac{1}{2} + \\frac{1}{2} = 1$.")
    Completion.objects.filter(step__solution=world.solution, step__index=1).update(text="# Answer\n\n$1$")
    step = Step.objects.filter(solution=world.finished.solution).first() or StepFactory(
        solution=world.finished.solution, index=0)
    if not step.completions.exists():
        CompletionFactory(step=step, index=0, text="Since $\\sqrt{4} = 2$, the answer is $2$.")
    compute_campaign_metrics(campaign)
    return world


def _url(name: str, site: World) -> str:
    return reverse(name, kwargs=RULES[name].kwargs(site))


def _context(browser: Browser, live_server: Any, site: World, role: str) -> BrowserContext:
    context = browser.new_context(base_url=live_server.url)
    if role != "anonymous":
        client = Client()
        client.force_login(site.users[role])  # the same session the login form would give
        host = urlparse(live_server.url).hostname
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                              "domain": host, "path": "/"}])
    return context


def _link_problems(page: Page, checked: dict[str, int]) -> list[str]:
    """Links of the page (same site) that answer 403, 404 or 5xx to this role, after redirects."""
    problems = []
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
    for href in hrefs:
        if not href or href.startswith(("#", "mailto:", "javascript:")) or urlparse(href).netloc:
            continue
        target = urljoin(page.url, href).split("#")[0]
        if target not in checked:
            checked[target] = page.request.get(target).status
        if checked[target] in (403, 404) or checked[target] >= 500:
            problems.append(f"links to {href} ({checked[target]})")
    return problems


def _check_page(page: Page, label: str, width: int, checked: dict[str, int]) -> list[str]:
    problems = []
    if page.locator("header.site-header nav[aria-label=Main]").count() != 1:
        problems.append("no site nav")
    scroll_width, inner_width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    if scroll_width > inner_width:
        problems.append(f"scrolls sideways ({scroll_width} px wide in {inner_width})")
    raw = [text.strip()[:80] for text in page.evaluate(RAW_TEXT_JS) if RAW_MATH.search(text)]
    if raw:
        problems.append(f"raw math {raw[:3]}")
    if width == WIDTHS[0]:  # links are the same at every width
        problems += _link_problems(page, checked)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{label}--{width}.png"), full_page=True)
    return problems


@pytest.mark.parametrize("role", VISITORS)
def test_every_page_as_each_role(browser: Browser, live_server, site: World, role: str) -> None:
    role_index = ROLES.index(role)
    pages = [name for name in PAGES if RULES[name].access[role_index] == "+"]
    assert pages, f"{role} may open no page at all"
    context = _context(browser, live_server, site, role)
    page = context.new_page()
    missing: list[str] = []
    page.on("response", lambda r: missing.append(f"{r.status} {r.url}")
            if r.status >= 400 and r.request.resource_type in ("stylesheet", "script", "image", "font") else None)
    failures: list[str] = []
    checked: dict[str, int] = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name in pages:
            response = page.goto(_url(name, site))
            assert response is not None
            where = f"{name} as {role} at {width} px"
            if response.status >= 400:
                failures.append(f"{where}: answers {response.status}")
                continue
            label = f"{name.replace(':', '-')}--{ROLE_NAMES.get(role, role)}"
            failures += [f"{where}: {problem}" for problem in _check_page(page, label, width, checked)]
    assert page.request.get("/favicon.ico").status == 200
    context.close()
    assert not missing, f"resources missing: {sorted(set(missing))}"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("role, path, status", [
    ("anonymous", "/no-such-page/", 404),
    ("labeler_in", "/no-such-page/", 404),
    ("labeler_in", "/models/", 403),          # reward models are for researchers and admins
    ("researcher", "/manage/", 403),          # managing is for campaign admins and staff
    ("researcher", "/manage/c/b/", 404),      # a campaign they are no member of: as if it did not exist
    ("staff", "/manage/c/no-such-campaign/", 404),
])
def test_error_pages_carry_the_site_layout(browser: Browser, live_server, site: World, role: str, path: str,
                                           status: int) -> None:
    Campaign.objects.get_or_create(slug="b", defaults={"name": "B"})
    context = _context(browser, live_server, site, role)
    page = context.new_page()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        response = page.goto(path)
        assert response is not None and response.status == status
        assert page.locator(f'[data-error-page="{status}"]').is_visible()
        assert page.locator("header.site-header nav[aria-label=Main]").is_visible()
        assert page.locator("[data-back]").get_attribute("href") in ("/", f"/accounts/login/?next={path}")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        slug = path.strip("/").replace("/", "-") or "home"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"error-{status}-{slug}--{ROLE_NAMES.get(role, role)}--{width}.png"),
                        full_page=True)
    # A labeler's nav offers only the places a labeler may open.
    if role == "labeler_in":
        nav = page.locator("header.site-header .site-links").inner_text()
        assert "Reward models" not in nav and "PRM vs ORM" not in nav and "Manage" not in nav
    context.close()


def test_the_500_page_carries_the_layout_and_hides_the_error(browser: Browser, live_server, site: World,
                                                              settings) -> None:
    settings.ROOT_URLCONF = "tests.ui.urls_fail"
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    page = browser.new_page(base_url=live_server.url)
    response = page.goto("/ui-test/fail")
    assert response is not None and response.status == 500
    assert page.locator('[data-error-page="500"]').is_visible()
    assert page.locator("header.site-header nav[aria-label=Main]").is_visible()
    assert "must not show" not in page.content()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "error-500--anonymous--1280.png"), full_page=True)
    page.close()


def test_every_get_url_is_a_page_or_says_why_not() -> None:
    gets = {name for name, rule in RULES.items() if rule.method == "get"}
    assert set(NOT_PAGES) <= gets, "NOT_PAGES names a URL that is gone"
    assert {"annotate:workspace", "manage:dashboard", "pages:datasets", "jobs:dashboard"} <= set(PAGES)

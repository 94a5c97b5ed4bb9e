"""The workspace in real headless Chromium against a live server: mouse, keyboard, reload, modes, math, XSS."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from playwright.sync_api import Page, Route, expect

from annotate.models import Assignment, AssignmentStatus, CampaignMode, Rating, RatingRevision, StepDecision
from tests.factories import PASSWORD, solution_with_steps

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "labeling"


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Your campaigns")


def start_labeling(page: Page, slug: str) -> None:
    page.click(f'[data-campaign="{slug}"]')
    page.click('[data-action="start"]')
    expect(page.locator("#workspace")).to_be_visible()
    expect(page.locator("#workspace")).to_have_attribute("data-keyboard-ready", "true")  # shortcuts bound


def row(page: Page, index: int):
    return page.locator(f'[data-step-index="{index}"]')


def pressed(page: Page, index: int, value: str):
    return row(page, index).locator(f'button[data-rating="{value}"]')


@pytest.fixture
def algebra(campaign_factory, member, math500_rows):
    campaign = campaign_factory("algebra", name="Algebra", instructions="Rate each step. Math: $a^2+b^2=c^2$.")
    problem = math500_rows[0]
    for sample in range(3):
        solution_with_steps(campaign, [
            "We have $r = \\sqrt{0^2 + 3^2} = 3$.",
            "The angle is $\\theta = \\frac{\\pi}{2}$ since the point lies on the positive $y$-axis.",
            "So the polar coordinates are \\(\\left(3, \\frac{\\pi}{2}\\right)\\).",
            "The answer is \\boxed{\\left(3, \\frac{\\pi}{2}\\right)}",
        ], problem_text=problem["problem"] if sample == 0 else f"{problem['problem']} (copy {sample})",
            answer=problem["answer"])
    member(campaign, "ann")
    return campaign


def test_keyboard_only_labeling_of_a_whole_solution(page: Page, live_server, algebra) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    first = Assignment.objects.get(labeler__username="ann")
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_hidden()
    # Typing in a text field never rates.
    row_posts: list[str] = []
    page.on("request", lambda request: row_posts.append(request.url)
            if request.method == "POST" and re.search(r"/(rate|flag|decide|next)$", request.url) else None)
    page.fill("textarea[name=reason_text]", "")
    page.focus("textarea[name=reason_text]")
    page.keyboard.type("3 2 1 j f")
    page.locator("textarea[name=reason_text]").evaluate("el => el.blur()")
    # What proves the negative: a handled key sends its POST from inside the keydown handler (htmx sends on the
    # synthetic click), which has run when keyboard.type returns, and the page's request events reach us before
    # the answer to a later evaluate does: after this round trip, no row POST means no key was taken.
    page.evaluate("() => document.readyState")
    assert row_posts == []
    assert not Rating.objects.exists()
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(row(page, 1)).to_have_class(re.compile("is-focused"))
    page.keyboard.press("0")  # "0" = okay, on the step focus moved to
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("k")  # back up and change step 2's rating in place
    page.keyboard.press("+")
    expect(pressed(page, 1, "1")).to_have_attribute("aria-pressed", "true")
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "false")
    page.keyboard.press("f")  # focus moved on to step 3 (the next one to rate)
    expect(row(page, 2).locator("button[data-flag]")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("2")
    expect(pressed(page, 2, "0")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("3")
    expect(pressed(page, 3, "1")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#progress")).to_contain_text("4 / 4 steps rated")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/assignments/\d+/$"))
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(first.pk))
    first.refresh_from_db()
    assert first.finish_reason == "solution" and first.total_time_ms is not None
    ratings = list(Rating.objects.filter(assignment=first).order_by("completion__step__index")
                   .values_list("rating", "flagged"))
    assert ratings == [(1, False), (1, False), (0, True), (1, False)]
    assert all(t is not None and t >= 0 for t in Rating.objects.values_list("time_ms", flat=True))


def test_mouse_rating_survives_reload_and_minus_one_waits_for_submit(page: Page, live_server, algebra) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    pressed(page, 0, "1").click()
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#announce")).to_have_text("Saved: Step 1 rated +1 (great).")
    expect(pressed(page, 2, "1")).to_be_disabled()  # in order: step 3 waits for step 2
    pressed(page, 1, "0").click()
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    page.reload()
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#progress")).to_contain_text("2 / 4 steps rated")
    # Leaving and coming back through the campaign page resumes the same solution.
    page.goto(f"{live_server.url}/c/algebra/")
    expect(page.locator('[data-action="start"]')).to_have_text("Resume labeling")
    page.click('[data-action="start"]')
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    pressed(page, 2, "-1").click()
    submit = page.locator('[data-action="next"]')
    expect(submit).to_have_attribute("data-found-error", "")
    expect(submit).to_be_focused()  # the keyboard focus goes to the submit control
    expect(pressed(page, 3, "1")).to_be_disabled()
    expect(pressed(page, 2, "1")).to_be_enabled()  # the −1 itself can still change
    assignment = Assignment.objects.get(labeler__username="ann")
    assert assignment.status == AssignmentStatus.LEASED
    page.reload()  # still open after a reload, focus on submit
    expect(page.locator('[data-action="next"]')).to_be_focused()
    page.locator('[data-action="next"]').click()
    page.wait_for_url(re.compile(r"/assignments/\d+/$"))
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(assignment.pk))
    assignment.refresh_from_db()
    assert assignment.finish_reason == "found_error" and assignment.status == AssignmentStatus.SUBMITTED
    assert list(Rating.objects.filter(assignment=assignment).order_by("completion__step__index")
                .values_list("rating", flat=True)) == [1, 0, -1]


def test_an_accidental_minus_one_is_undone_by_keyboard(page: Page, live_server, algebra) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    first = Assignment.objects.get(labeler__username="ann")
    for key in ("3", "3", "3"):
        page.keyboard.press(key)
    expect(pressed(page, 2, "1")).to_have_attribute("aria-pressed", "true")
    for _ in range(3):
        page.keyboard.press("k")  # back from step 4 to step 1
    page.keyboard.press("1")  # a slip: −1 on step 1, after which steps 2 and 3 were rated
    expect(page.locator("[data-removed]")).to_have_text(
        "Steps 2 and 3 were rated after step 1, which is now −1: their ratings were removed from this pass "
        "(kept in the revision history).")
    expect(page.locator('[data-action="next"]')).to_be_focused()
    expect(pressed(page, 1, "1")).to_be_disabled()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "minus-one-waits-for-submit.png"), full_page=True)
    assert Assignment.objects.get(pk=first.pk).status == AssignmentStatus.LEASED
    page.keyboard.press("3")  # change it back: the keys still act on the −1 step
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(pressed(page, 1, "1")).to_be_enabled()
    expect(pressed(page, 1, "1")).to_have_attribute("aria-pressed", "false")  # removed ratings stay removed
    for index, key, value in ((1, "3", "1"), (2, "3", "1"), (3, "1", "-1")):  # each key's answer before the next
        page.keyboard.press(key)
        expect(pressed(page, index, value)).to_have_attribute("aria-pressed", "true")
    expect(page.locator('[data-action="next"]')).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/assignments/\d+/$"))
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(first.pk))
    first.refresh_from_db()
    assert first.finish_reason == "found_error"
    assert list(Rating.objects.filter(assignment=first).order_by("completion__step__index")
                .values_list("rating", flat=True)) == [1, 1, 1, -1]
    assert RatingRevision.objects.filter(assignment=first, removed_from_pass=True).count() == 2


def test_a_rating_lost_in_flight_is_sent_again_and_saved_once(page: Page, live_server, algebra) -> None:
    """The first POST reaches the server but its answer is lost, the second meets a 503 (database restarting):
    the page re-sends it by itself, the key typed meanwhile waits its turn, and the server holds one rating."""
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    assignment = Assignment.objects.get(labeler__username="ann")
    sent: list[dict[str, str]] = []
    held: list[Route] = []

    def flaky(route: Route) -> None:
        sent.append(dict(parse_qsl(route.request.post_data or "")))
        if len(sent) == 1:
            route.fetch()  # the server saves it...
            route.abort("connectionreset")  # ...and the page never hears back
        elif len(sent) == 2:
            route.fulfill(status=503, body="The database is unavailable right now.", headers={"Retry-After": "2"})
        elif len(sent) == 3:
            held.append(route)  # the third try waits until the test has seen the alert (no race with the retry)
        else:
            route.continue_()

    page.route("**/rate", flaky)
    page.keyboard.press("3")
    expect(page.locator("#alerts")).to_contain_text("saving your last action again")
    page.keyboard.press("2")  # typed while the first is being re-sent: must not overtake it
    for _ in range(100):  # the third try reaches the route handler on the page's own timer
        if held:
            break
        page.wait_for_timeout(100)
    assert len(held) == 1 and len(sent) == 3
    held[0].continue_()
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    expect(pressed(page, 1, "0")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#alerts .alert-client")).to_have_count(0)
    step0 = [request for request in sent if request["step_index"] == "0"]
    assert len(step0) == 3 and len({request["time_ms"] for request in step0}) == 1  # one action, its first time
    assert [request["step_index"] for request in sent] == ["0", "0", "0", "1"]
    ratings = dict(Rating.objects.filter(assignment=assignment).values_list("completion__step__index", "rating"))
    assert ratings == {0: 1, 1: 0}
    assert not RatingRevision.objects.filter(rating__assignment=assignment).exists()


def test_give_up_and_bad_problem_with_reasons(page: Page, live_server, algebra) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    expect(page.locator('[data-action="give-up"]')).to_be_disabled()  # until a reason is typed
    expect(page.locator('[data-action="bad-problem"]')).to_be_disabled()
    expect(page.get_by_label("Reason (required for “Bad problem” and “Give up”)")).to_be_visible()
    page.fill("textarea[name=reason_text]", "   ")
    expect(page.locator('[data-action="give-up"]')).to_be_disabled()
    page.fill("textarea[name=reason_text]", "I cannot follow step 2")
    expect(page.locator('[data-action="give-up"]')).to_be_enabled()
    first = Assignment.objects.get(status=AssignmentStatus.LEASED)
    page.click('[data-action="give-up"]')
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(first.pk))
    expect(page.locator("#alerts")).to_be_empty()
    # The server still refuses (the pass was finished elsewhere): a readable message in place, text kept.
    second = Assignment.objects.get(status=AssignmentStatus.LEASED)
    Assignment.objects.filter(pk=second.pk).update(status=AssignmentStatus.SUBMITTED, finish_reason="give_up")
    page.fill("textarea[name=reason_text]", "The problem statement is cut off")
    page.click('[data-action="bad-problem"]')
    expect(page.locator("#alerts")).to_contain_text("This solution is already finished")
    expect(page.locator("#alerts")).not_to_contain_text("reason_text")
    expect(page.locator("textarea[name=reason_text]")).to_have_value("The problem statement is cut off")
    assert page.url.endswith(f"/assignments/{second.pk}/")
    Assignment.objects.filter(pk=second.pk).update(status=AssignmentStatus.LEASED, finish_reason=None)
    page.click('[data-action="bad-problem"]')
    expect(page.locator("#workspace")).not_to_have_attribute("data-assignment", str(second.pk))
    done = dict(Assignment.objects.filter(status=AssignmentStatus.SUBMITTED)
                .values_list("finish_reason", "finish_reason_text"))
    assert done == {"give_up": "I cannot follow step 2", "bad_problem": "The problem statement is cut off"}
    assert Assignment.objects.filter(status=AssignmentStatus.LEASED).count() == 1


def test_katex_renders_and_workspace_screenshot(page: Page, live_server, algebra) -> None:
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    expect(page.locator(".problem .katex").first).to_be_visible()
    expect(row(page, 3).locator(".katex")).to_have_count(1)  # the bare \boxed{} too
    expect(page.locator(".answer .katex")).to_have_count(1)
    visible = page.locator("#steps").inner_text() + page.locator(".problem").inner_text()
    assert "$" not in visible and "\\frac" not in visible and "\\boxed" not in visible
    page.click(".instructions-box summary")
    expect(page.locator(".instructions-box .katex")).to_have_count(1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "workspace.png"), full_page=True)
    assert (ARTIFACTS / "workspace.png").stat().st_size > 10_000


def test_each_math_span_renders_on_its_own_within_bounds(page: Page, live_server, campaign_factory, member) -> None:
    """A 600 KB formula is shown as text with a note, 2,000 nested braces fail alone, a 10000em rule is capped
    by maxSize: every later span on the page still renders, and the # Answer block renders too."""
    campaign = campaign_factory("hostile-math")
    solution_with_steps(campaign, [
        "The total is $20/3$.\n\n# Answer\n\n\\dfrac{20}{3}",
        "Huge: $" + "x+" * 300_000 + "1$ and after it $a+b$.",
        "Deep: $" + "{" * 2000 + "x" + "}" * 2000 + "$ and after it $c^2$.",
        "Wide: $\\rule{10000em}{10000em}$ and after it $d_1$.",
        "Last: $\\frac{1}{2}$",
    ], problem_text="What is $\\frac{40}{6}$?", answer="\\frac{20}{3}")
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "hostile-math")
    expect(row(page, 4).locator(".katex")).to_have_count(1)
    # The # Answer block: rendered, no raw LaTeX left.
    expect(row(page, 0).locator(".katex")).to_have_count(2)
    assert "\\dfrac" not in row(page, 0).locator(".step-text").inner_text()
    # 600 KB: not handed to KaTeX; shown as text with a note; the span after it renders.
    huge = row(page, 1)
    expect(huge.locator(".math-fallback")).to_have_count(1)
    expect(huge.locator(".math-note")).to_contain_text("too long to display as math")
    expect(huge.locator(".katex")).to_have_count(1)
    assert len(huge.locator(".math-fallback").inner_text()) > 600_000
    # 2,000 nested braces: that span alone falls back (or renders); the one after it renders.
    deep = row(page, 2)
    expect(deep.locator(".katex").last).to_contain_text("c")
    assert deep.locator(".math-fallback").count() + deep.locator(".katex").count() == 2
    # \rule{10000em}{10000em}: capped to maxSize, so the step stays a normal row on the page.
    wide = row(page, 3)
    expect(wide.locator(".katex")).to_have_count(2)
    box = wide.bounding_box()
    assert box is not None and box["height"] < 400, box
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"] + 1
    expect(page.locator(".problem-text .katex")).to_have_count(1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile-math.png"))
    print("nested braces:", "shown as text" if deep.locator(".math-fallback").count() else "rendered")


def test_hostile_step_text_runs_no_code(page: Page, live_server, campaign_factory, member) -> None:
    campaign = campaign_factory("xss")
    solution_with_steps(campaign, [
        "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned=2\">",
        "Click $\\href{javascript:window.__pwned=3}{\\text{here}}$ or \\(\\url{javascript:window.__pwned=4}\\)",
    ])
    member(campaign, "eve")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server.url, "eve")
    start_labeling(page, "xss")
    expect(row(page, 1).locator(".katex")).to_have_count(2)
    expect(row(page, 0)).to_contain_text("<script>window.__pwned = 1</script>")  # shown as text
    assert page.locator("a[href^='javascript']").count() == 0
    row(page, 1).locator(".katex").first.click()
    # What proves the negative: nothing made from the step text can run code later — no javascript: link
    # (above), no <img> or <script> element (here) — and the click's own handlers have run when click() returns.
    expect(page.locator("#workspace img, #workspace script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None and dialogs == []


def test_conversational_mode_end_to_end(page: Page, live_server, campaign_factory, member) -> None:
    campaign = campaign_factory("chat", mode=CampaignMode.CONVERSATIONAL)
    solution_with_steps(campaign, [["$2 + 2 = 4$", "$2 + 2 = 5$"], ["So the answer is $4$.", "So the answer is $5$."]],
                 problem_text="What is $2 + 2$?", answer="4")
    member(campaign, "ann")
    log_in(page, live_server.url, "ann")
    start_labeling(page, "chat")
    expect(row(page, 1)).to_contain_text("Continue from step 1 first.")
    step0 = row(page, 0)
    page.keyboard.press("3")  # candidate 1 of step 1: +1
    expect(step0.locator('[data-completion-index="0"] button[data-rating="1"]')).to_have_attribute(
        "aria-pressed", "true")
    step0.locator('[data-completion-index="1"] button[data-rating="-1"]').click()  # candidate 2: −1 (mouse)
    expect(step0.locator('[data-completion-index="1"] button[data-rating="-1"]')).to_have_attribute(
        "aria-pressed", "true")
    expect(step0.locator('[data-completion-index="1"] button[data-choose]')).to_be_disabled()
    step0.locator('[data-completion-index="0"] button[data-choose]').click()
    step1 = row(page, 1)
    expect(step1.locator("[data-completion-index]")).to_have_count(2)
    step1.locator('[data-completion-index="0"] button[data-rating="0"]').click()
    step1.locator('[data-completion-index="1"] button[data-rating="-1"]').click()
    step1.locator("textarea[name=human_text]").fill("So $2 + 2 = 4$, the answer is $4$.")
    step1.locator('[data-action="write-own"]').click()
    expect(page.locator("#progress")).to_contain_text("2 / 2 steps decided")
    expect(row(page, 1).locator(".human-step .katex")).to_have_count(2)
    page.click('[data-action="next"]')
    expect(page.locator(".messages")).to_contain_text("No work left")
    assignment = Assignment.objects.get()
    assert assignment.finish_reason == "solution"
    decisions = {d.step.index: (d.chosen_completion, d.human_text)
                 for d in StepDecision.objects.select_related("step")}
    assert decisions == {0: (0, None), 1: (None, "So $2 + 2 = 4$, the answer is $4$.")}
    assert sorted(Rating.objects.values_list("completion__step__index", "completion__index", "rating")) == [
        (0, 0, 1), (0, 1, -1), (1, 0, 0), (1, 1, -1)]

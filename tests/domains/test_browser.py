"""Other domains in real headless Chromium: the human grader's final-answer rating on a real MMLU-Pro response,
a custom scale's own keys, error value and error-category key, and the demo-mmlu campaign from its empty
dashboard to PRM vs ORM per domain."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from annotate.models import Assignment, Campaign, Membership, Rating, Role, Solution
from annotate.services.problems import import_problems, import_solutions
from rewards.jobs.models import CandidatePool
from tests.domains.test_scales_end_to_end import FOUR
from tests.labeling.test_browser import log_in, row, start_labeling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "domains"
NUMBER = re.compile(r"^\d+(\.\d+)?$")


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
    page.keyboard.press("y")  # the second category's letter (q w e r rate on this scale, so t, y)
    expect(row(page, 2).locator('button[data-error-category="invalid inference"]')).to_have_attribute(
        "aria-pressed", "true")
    expect(row(page, 3).locator('button[data-rating="2"]')).to_be_disabled()
    ratings = dict(Rating.objects.values_list("completion__step__index", "rating"))
    assert ratings == {0: 2, 1: -1, 2: -2}
    assert Rating.objects.get(completion__step__index=2).error_category == "invalid inference"


def _label_queue_through_the_api(campaign, labeler) -> Counter[tuple[str, bool | None]]:
    """Lease and label demo-mmlu's queue in its own order, as a labeler's program would (``POST .../lease/``, then
    the whole solution in one ``POST /api/assignments/{id}/labeling/``): every sentence +1 where the letter is
    right, the concluding sentence −1 (the first error) where it is wrong, 0 where no letter could be read. It
    stops once the held-out (test) split and the training split each hold labeled right and wrong answers, so
    the PRM, the ORM and the held-out step-level figures see both classes."""
    from rest_framework.test import APIClient

    from rewards.exports import ExportOptions, split_of
    from tests.factories import PASSWORD

    client = APIClient()
    assert client.login(username=labeler.username, password=PASSWORD)
    options = ExportOptions()
    labeled: Counter[tuple[str, bool | None]] = Counter()
    for _ in range(campaign.solutions.count()):
        lease = client.post(f"/api/campaigns/{campaign.pk}/lease/")
        assert lease.status_code == 200 and lease.json()["assignment"], lease.content
        assignment = Assignment.objects.select_related("solution__problem").get(pk=lease.json()["assignment"]["id"])
        solution = assignment.solution
        steps = solution.steps.count()
        ratings = {True: [1] * steps, False: [1] * (steps - 1) + [-1], None: [0] * steps}[solution.is_correct]
        body = {"ratings": [{"step_index": i, "rating": r} for i, r in enumerate(ratings)],
                "client_key": f"mmlu-{assignment.pk}"}
        answer = client.post(f"/api/assignments/{assignment.pk}/labeling/", body, format="json")
        assert answer.status_code == 200, answer.content
        assert answer.json()["finish_reason"] == ("found_error" if solution.is_correct is False else "solution")
        split = split_of(solution.problem.text_sha256, options.seed, options.test_fraction)
        labeled[(split, solution.is_correct)] += 1
        if all(labeled[(split, verdict)] for split in ("train", "test") for verdict in (True, False)):
            return labeled
    raise AssertionError(f"the queue ran out before both splits held right and wrong answers: {labeled}")


@pytest.mark.worker
@pytest.mark.training
def test_demo_mmlu_loads_and_its_compare_fills_the_dashboard_per_domain(
        page: Page, live_server, celery_worker_process, make_user) -> None:
    """``demo-mmlu`` as ``./run demo`` builds it; without labels its dashboard says to label first (a button to
    the campaign, not a command); once a labeler has labeled part of its queue, its admin compares PRM and ORM on
    its pool (the first 3 answers of each question) and the best-of-N, step-level and per-domain tables fill."""
    from demo.loader import MMLU_SLUG, load_demo_mmlu
    from rewards.jobs.models import ComparisonRun
    from tests.factories import PASSWORD

    counts = load_demo_mmlu()
    assert counts["problems"] == 180 and counts["pool_candidates"] == 990, counts
    campaign = Campaign.objects.get(slug=MMLU_SLUG)
    pool = CandidatePool.objects.get(campaign=campaign)
    domains = sorted(set(pool.problems.values_list("problem__subject", flat=True)))
    assert len(domains) == 6, domains
    admin, labeler = make_user("mmlu-admin"), make_user("mmlu-labeler")
    Membership.objects.create(campaign=campaign, user=admin, role=Role.ADMIN)
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", admin.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto(f"{live_server.url}/models/dashboard/{MMLU_SLUG}/")
    empty = page.locator("[data-needs-labels]")
    expect(empty).to_contain_text("Label some solutions first")
    assert "manage.py" not in empty.inner_text()
    expect(page.locator('[data-action="label-first"]')).to_have_attribute("href", f"/c/{MMLU_SLUG}/")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "demo-mmlu-no-labels.png"), full_page=True)

    labeled = _label_queue_through_the_api(campaign, labeler)
    page.reload()
    expect(page.locator("[data-needs-labels]")).to_have_count(0)
    expect(page.locator('select[name="pool"] option:checked')).to_have_attribute("value", str(pool.pk))
    page.fill('input[name="per_problem"]', "3")  # 270 answers to score, not 990
    page.click('[data-action="compare"]')
    status = page.locator("[data-run-status]")
    expect(status).to_have_attribute("data-run-status", re.compile("succeeded|failed|cancelled"), timeout=900_000)
    run = ComparisonRun.objects.get(campaign=campaign)
    assert run.status == "succeeded", run.error
    assert run.source_pool == pool and run.pool.candidate_count == 270, labeled

    for n_row in page.locator('table[data-figure="best-of-n"] tr[data-n]').all():
        for method in ("prm", "orm", "majority", "pass"):
            _assert_figure(n_row.locator(f'td[data-method="{method}"]'))
    expect(page.locator('table[data-figure="best-of-n"] tr[data-n]')).to_have_count(3)  # N = 1, 2, 3
    step_level = page.locator('table[data-figure="step-level"] tr[data-model]').first
    for metric in ("step_auroc", "first_error_f1", "first_error_f1_calibrated", "threshold"):
        assert NUMBER.match(step_level.locator(f'td[data-metric="{metric}"]').inner_text().strip()), metric
    per_domain = page.locator('table[data-figure="per-domain"] tr[data-domain]')
    expect(per_domain).to_have_count(6)
    assert [domain_row.get_attribute("data-domain") for domain_row in per_domain.all()] == domains
    for domain_row in per_domain.all():
        for method in ("prm", "orm", "majority", "pass"):
            _assert_figure(domain_row.locator(f'td[data-method="{method}"]'))
        for pair in ("prm-orm", "prm-majority"):  # paired differences in points: may be negative
            cell = domain_row.locator(f'td[data-method="{pair}"]')
            assert re.match(r"^-?\d+(\.\d+)?$", cell.inner_text().strip()), pair
        # a handful of labels (the queue stops once both splits hold a right and a wrong answer): no verdict
        expect(domain_row.locator("[data-domain-verdict] [data-verdict-withheld]")).to_have_count(1)
    expect(page.locator('[data-card="per-domain"] h2')).to_have_text("Best-of-N per domain at N = 3")
    expect(page.locator("[data-verdict]")).to_have_count(0)
    withheld = page.locator("div[data-verdict-withheld]")
    expect(withheld).to_have_count(1)
    expect(withheld).to_contain_text(re.compile(r"labeled steps rated wrong \(fewer than 50\)"))
    page.screenshot(path=str(ARTIFACTS / "demo-mmlu-compare.png"), full_page=True)
    assert (ARTIFACTS / "demo-mmlu-compare.png").stat().st_size > 10_000
    assert errors == []


def _assert_figure(cell) -> None:
    """A percent with its interval around it."""
    value = cell.inner_text().strip()
    assert NUMBER.match(value), value
    low, high = float(cell.get_attribute("data-ci-low") or "nan"), float(cell.get_attribute("data-ci-high") or "nan")
    assert low <= float(value) <= high, (low, value, high)

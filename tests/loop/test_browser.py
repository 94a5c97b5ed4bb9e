"""The path a new user takes, in real headless Chromium with the real worker and real (CPU) training:
log in as the campaign's admin → its dashboard → "Compare PRM and ORM" on the pool it offers first (the math
demo's headroom pool: MMLU-Pro math, 11 real models' answers graded by letter, as ``./run demo`` imports it,
beside an uploaded pool), the head on every label, the first 4 answers per question so that scoring stays a few
minutes → the page fills with the four best-of-N curves, the PRM's step-level table, every figure's interval and
the verdict under the tables."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "loop"
NUMBER = re.compile(r"^\d+(\.\d+)?$")


def test_compare_prm_and_orm_from_one_click(page: Page, live_server, celery_worker_process, campaign_admin,
                                            loop_campaign, loop_pool) -> None:
    from demo.loader import headroom_pool_name, import_headroom_pool
    from rewards.jobs.models import CandidatePool, ComparisonRun
    from rewards.jobs.services.comparisons import DEFAULT_PER_PROBLEM

    assert import_headroom_pool(loop_campaign) == 660  # 60 questions x 11 models
    headroom = CandidatePool.objects.get(campaign=loop_campaign, name=headroom_pool_name(loop_campaign))

    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", campaign_admin.username)
    page.fill("input[name=password]", "pw-Steplab-1")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto(f"{live_server.url}/models/dashboard/{loop_campaign.slug}/")
    expect(page.locator("[data-empty]").first).to_be_visible()
    # the headroom pool is marked the comparison's default: preselected over the uploaded pool
    expect(page.locator('select[name="pool"] option')).to_have_count(2)
    expect(page.locator('select[name="pool"] option:checked')).to_have_attribute("value", str(headroom.pk))
    expect(page.locator(f'select[name="pool"] option[value="{loop_pool.pk}"]')).to_have_count(1)
    expect(page.locator('input[name="max_steps"]')).to_have_value("300")
    expect(page.locator('input[name="per_problem"]')).to_have_value(str(DEFAULT_PER_PROBLEM))
    page.fill('input[name="per_problem"]', "4")  # 240 answers to score, not 660
    page.click('[data-action="compare"]')
    status = page.locator("[data-run-status]")
    expect(status).to_have_attribute("data-run-status", re.compile("queued|running"))
    # progress is polled; when the run ends the page reloads with its figures
    expect(status).to_have_attribute("data-run-status", re.compile("succeeded|failed|cancelled"), timeout=600_000)
    run = ComparisonRun.objects.get(campaign=loop_campaign)
    assert run.status == "succeeded", run.error
    assert run.source_pool == headroom and run.per_problem == 4
    assert run.pool.pool_size == 4 and run.pool.candidate_count == 240 and run.pool.problem_count == 60
    assert run.prm_job.config["method"] == run.orm_job.config["method"] == "auto"
    assert run.prm_job.metrics["method"] == run.orm_job.metrics["method"] == "head"  # a CPU: every label
    expect(page.locator('table[data-figure="best-of-n"] tr[data-n]')).to_have_count(3)  # N = 1, 2, 4
    for row in page.locator('table[data-figure="best-of-n"] tr[data-n]').all():
        for method in ("prm", "orm", "majority", "pass"):
            cell = row.locator(f'td[data-method="{method}"]')
            value = cell.inner_text().strip()
            assert NUMBER.match(value), method
            low = float(cell.get_attribute("data-ci-low") or "nan")
            high = float(cell.get_attribute("data-ci-high") or "nan")
            assert low <= float(value) <= high, (method, low, value, high)
    # real answers graded by letter: pass@N grows with N (the pool has headroom)
    passes = [float(cell.inner_text())
              for cell in page.locator('table[data-figure="best-of-n"] td[data-method="pass"]').all()]
    assert passes[0] < passes[-1], passes
    expect(page.locator('[data-card="per-domain"]')).to_have_count(0)  # one domain: the overall table says it all
    step_level = page.locator('table[data-figure="step-level"] tr[data-model]').first
    for metric in ("step_auroc", "first_error_f1", "first_error_f1_calibrated", "first_error_f1_crossfit",
                   "threshold"):
        cell = step_level.locator(f'td[data-metric="{metric}"]')
        assert NUMBER.match(cell.inner_text().strip()), metric
        assert cell.get_attribute("data-ci-low") is not None and cell.get_attribute("data-ci-high") is not None
    assert "labeled steps in" in step_level.locator("td[data-trained-on]").inner_text()
    # the intervals are drawn over problems: the table says how many the held-out solutions come from
    assert re.fullmatch(r"[\d,]+ of [\d,]+ problems", step_level.locator("td[data-heldout]").inner_text().strip())
    # what the stored threshold buys over 0.5, paired over the same problem draws
    gain = page.locator(f'[data-threshold-verdict][data-model="{run.prm_job.reward_model.pk}"]')
    expect(gain).to_have_count(1)
    assert re.search(r"First-error F1 at (the threshold stored with the PRM \([\d.]+ %\) (beats 0.5|vs 0.5)|0.5 beats)",
                     gain.inner_text()), gain.inner_text()
    # a dozen wrong steps to learn from: the verdicts are withheld and the page says why in their place
    expect(page.locator("[data-verdict]")).to_have_count(0)
    words = page.locator("[data-verdict-withheld]").inner_text()
    assert re.search(r"labeled steps rated wrong \(fewer than 50\)", words), words
    expect(page.locator('canvas[data-chart="best-of-n"]')).to_have_attribute("data-drawn", "true")
    labels = page.evaluate("""() => Chart.getChart(document.querySelector('canvas[data-chart="best-of-n"]'))
                              .data.datasets.map(d => d.label).filter(l => !l.includes('σ'))""")
    assert labels == ["PRM", "ORM", "Majority vote", "pass@N"]
    ticks = page.evaluate("""() => Chart.getChart(document.querySelector('canvas[data-chart="best-of-n"]'))
                             .scales.x.ticks.map(t => t.value)""")
    assert ticks == [1, 2, 4]
    caption = page.locator('[data-caption="best-of-n"]').inner_text()
    assert f"PRM #{run.prm_job_id}" in caption and f"ORM #{run.orm_job_id}" in caption
    assert str(run.dataset_version) in caption and headroom.name in caption and "first 4 per problem" in caption
    no_scroll = page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert no_scroll
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    assert (ARTIFACTS / "compare.png").stat().st_size > 10_000
    assert errors == []

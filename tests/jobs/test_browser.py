"""The dashboard and a job page in real headless Chromium: charts drawn from the data, with a screenshot."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "jobs"


def _log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-Steplab-1")
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_dashboard_draws_best_of_n_chart(page: Page, live_server, researcher, scored_pool) -> None:
    from rewards.jobs.services.evaluation import evaluate_pool

    pool, scorings = scored_pool
    evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=100)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 and "favicon" not in r.url else None)
    _log_in(page, live_server.url, researcher.username)
    page.goto(f"{live_server.url}/models/dashboard/{pool.campaign.slug}/")
    for chart in ("best-of-n", "data-efficiency", "history"):
        expect(page.locator(f'canvas[data-chart="{chart}"]')).to_have_attribute("data-drawn", "true")
    # Chart.js holds the datasets: PRM, ORM, majority, pass means plus their two band lines each.
    labels = page.evaluate("""() => Chart.getChart(document.querySelector('canvas[data-chart="best-of-n"]'))
                              .data.datasets.map(d => d.label)""")
    assert [label for label in labels if "σ" not in label] == ["PRM", "ORM", "Majority vote", "pass@N"]
    assert len(labels) == 12
    scale = page.evaluate("""() => Chart.getChart(document.querySelector('canvas[data-chart="best-of-n"]'))
                             .scales.x.type""")
    assert scale == "logarithmic"
    expect(page.locator('[data-table="best-of-n"] tr[data-n]')).to_have_count(4)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
    assert errors == [] and missing == []


def test_job_page_polls_and_draws_the_loss_curve(page: Page, live_server, researcher, dataset_version) -> None:
    from django.utils import timezone

    from rewards.jobs.models import TrainingJob

    job = TrainingJob.objects.create(kind="prm", campaign=dataset_version.campaign, dataset_version=dataset_version,
                                     dataset_path="/x.jsonl", status="running", started_at=timezone.now(),
                                     heartbeat_at=timezone.now(), step=2, total_steps=10, progress=0.2,
                                     curve=[{"step": 1, "loss": 0.8}, {"step": 2, "loss": 0.6}],
                                     log_tail="\x1b[1mBertModel LOAD REPORT\x1b[0m from: /m\n"
                                              "Key | Status\n----+-------\n"
                                              + "x" * 3000 + " a line longer than any screen")
    _log_in(page, live_server.url, researcher.username)
    page.goto(f"{live_server.url}/models/jobs/{job.pk}/")
    expect(page.locator('canvas[data-chart="loss"]')).to_have_attribute("data-drawn", "true")
    log = page.locator("[data-log-tail]").inner_text()
    assert "LOAD REPORT" not in log and "\x1b" not in log and "a line longer than any screen" in log
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    # The watcher moves the job on; the htmx poll swaps the new state in without a reload.
    TrainingJob.objects.filter(pk=job.pk).update(status="succeeded", progress=1.0, step=10,
                                                 curve=[{"step": s, "loss": 1 / s} for s in range(1, 11)])
    expect(page.locator("#job-progress")).to_have_attribute("data-job-status", "succeeded", timeout=10_000)
    points = page.evaluate("""() => Chart.getChart(document.querySelector('canvas[data-chart="loss"]'))
                              .data.datasets[0].data.length""")
    assert points == 10
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "job.png"), full_page=True)

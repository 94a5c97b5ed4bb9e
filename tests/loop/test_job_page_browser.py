"""The pages this round changed, in real headless Chromium: the training job's sanity checks beside its metrics,
and a dashboard start form refused (the page again, its error beside the form, what was typed kept)."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "loop"
SANITY = {"answer_rewrite": {"n": 212, "mean_abs_change": 0.21},
          "harmless_prefix": {"n": 1480, "mean_logit_change": 0.31},
          "shuffle": {"n": 1480, "spearman": 0.85},
          "last_step_lowest": {"n": 96, "model_rate": 0.59, "data_rate": 0.054}}


def _login(page: Page, url: str, user) -> None:
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "pw-Steplab-1")
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_job_page_sanity_checks_and_a_refused_start_form(page: Page, live_server, campaign_admin,
                                                          loop_campaign) -> None:
    from rewards.jobs.models import JobStatus, SamplingJob
    from tests.factories import TrainingJobFactory

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    job = TrainingJobFactory(campaign=loop_campaign, status=JobStatus.SUCCEEDED, step=152, total_steps=300,
                             progress=1.0, metrics={
                                 "kind": "prm", "method": "head", "train": {"loss": 0.41, "examples_per_s": 900.0},
                                 "data": {"train": {"steps": 4821}},
                                 "validation": {"step_level": {"accuracy": 0.71, "auroc": 0.69}}, "sanity": SANITY})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _login(page, live_server.url, campaign_admin)
    page.goto(f"{live_server.url}/models/jobs/{job.pk}/")
    rows = page.locator('[data-card="sanity"] tr[data-sanity]')
    expect(rows).to_have_count(4)
    rewrite = page.locator('tr[data-sanity="answer_rewrite"]')
    expect(rewrite).to_have_attribute("data-flagged", "true")
    expect(rewrite).to_contain_text("The score moves 0.21 when only the answer's format changes: it reads format.")
    expect(page.locator('tr[data-sanity="last_step_lowest"]')).to_contain_text("59.0 % (data 5.4 %)")
    expect(page.locator("[data-job-counter]")).to_have_text(
        "fitted on 4821 labeled examples in 152 optimizer iterations (it stops when it converges; at most 300)")
    expect(page.locator("table[data-metrics]")).to_contain_text("71.0 %")
    page.screenshot(path=str(ARTIFACTS / "job-sanity.png"), full_page=True)

    page.goto(f"{live_server.url}/models/dashboard/{loop_campaign.slug}/#sampling")
    form = page.locator("form[data-start-sampling]")
    form.locator('input[name="config"]').fill("[1, 2]")
    form.locator('input[name="n"]').fill("3")
    form.locator('button[type="submit"]').click()
    page.wait_for_load_state()
    refused = page.locator('form[data-start-sampling] [data-error-for="config"]')
    expect(refused).to_have_text("config: must be a JSON object, got list")
    expect(page.locator('form[data-start-sampling] input[name="config"]')).to_have_value("[1, 2]")
    expect(page.locator('form[data-start-sampling] input[name="n"]')).to_have_value("3")
    refused.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "dashboard-refused-sampling.png"))
    assert not SamplingJob.objects.filter(campaign=loop_campaign).exists()
    assert errors == []

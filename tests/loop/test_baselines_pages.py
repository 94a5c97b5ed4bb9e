"""The dashboard puts trivial baselines beside the PRM and the ORM (best-of-N cells, step-level rows, a verdict that
names the strongest one) and withholds its verdicts where the data is too thin to carry them."""
from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path

from django.urls import reverse

from rewards.jobs.models import EvaluationRun, JobStatus, RewardModel, ScoringJob
from rewards.jobs.services.evaluation import evaluate_scorings
from rewards.jobs.services.pools import import_pool
from rewards.jobs.services.scoring import held_out_step_metrics
from tests.factories import PASSWORD, CandidateScoreFactory, RewardModelFactory, ScoringJobFactory
from tests.loop.conftest import _steps

BASELINE_CELLS = ("length", "position", "random")


def _page(client, user, campaign) -> str:
    client.login(username=user.username, password=PASSWORD)
    return client.get(reverse("jobs:campaign_dashboard", args=[campaign.slug])).content.decode()


def _scored(campaign, pool, step_metrics: dict | None = None, counts: dict | None = None) -> dict[str, ScoringJob]:
    """A PRM and an ORM whose scores are written directly (seeded, right answers a little higher)."""
    from rewards.jobs.models import Candidate

    rng = random.Random(3)
    scorings = {}
    for kind in ("prm", "orm"):
        model = RewardModelFactory(kind=kind, campaign=campaign, name=f"base {kind.upper()}", location="/nowhere",
                                   base_model="default", trained_on=30, job__dataset_path="/x.jsonl",
                                   job__status=JobStatus.SUCCEEDED, job__progress=1.0)
        if counts:
            RewardModel.objects.filter(pk=model.pk).update(metrics={"data": {"train": counts[kind]}})
        scoring = ScoringJobFactory(reward_model=model, pool=pool, status=JobStatus.SUCCEEDED,
                                    step_metrics=(step_metrics or {}) if kind == "prm" else {})
        for candidate in Candidate.objects.filter(pool_problem__pool=pool):
            score = rng.random() * 0.8 + (0.2 if candidate.is_correct else 0.0)
            CandidateScoreFactory(scoring_job=scoring, candidate=candidate, score=score,
                                  score_min=score if kind == "prm" else None)
        scorings[kind] = scoring
    return scorings


def test_best_of_n_shows_the_baselines_with_intervals_and_withholds_the_verdict_on_six_problems(
        client, campaign_admin, loop_campaign, loop_pool) -> None:
    scorings = _scored(loop_campaign, loop_pool)
    evaluate_scorings(loop_campaign, prm_scoring=scorings["prm"].pk, orm_scoring=scorings["orm"].pk, trials=50,
                      user=campaign_admin)
    run = EvaluationRun.objects.get(campaign=loop_campaign)
    assert set(run.results["baselines"]) == set(BASELINE_CELLS)
    assert set(run.results["intervals"]["paired"]) >= {"prm-length", "orm-position", "prm-random"}
    page = _page(client, campaign_admin, loop_campaign)
    table = page[page.index('<table data-table="best-of-n"'):]
    table = table[:table.index("</table>")]
    for method in ("prm", "orm", "majority", "pass", *BASELINE_CELLS):
        cells = re.findall(rf'<td data-ci-low="([^"]*)" data-ci-high="([^"]*)" data-method="{method}" '
                           rf'title="95 % interval ([^"]*)">([^<]*)</td><td class="muted" data-ci-for="{method}">'
                           r"([^<]*)</td>", table)
        assert len(cells) == 3, (method, cells)  # N = 1, 2, 4
        for low, high, tooltip, value, shown in cells:  # the interval on the page and on hover, not a spread
            assert 0 <= float(low) <= float(value) <= float(high) <= 100, (method, low, value, high)
            assert tooltip == f"{low} to {high}" and shown == f"{low}–{high}"
    # six problems: no verdict, and the page says why in its place, the figures greyed
    assert "data-verdict>" not in page and "data-verdict-baseline" not in page
    withheld = re.search(r"<div class=\"verdict muted\" data-verdict-withheld>(.*?)</div>", page, re.S)
    assert withheld and "best-of-N rests on 6 problems (fewer than 10)" in withheld.group(1)
    assert 'data-figure="best-of-n" class="withheld"' in page


def _held_out(tmp_path: Path) -> tuple[Path, Path]:
    """A training file and a scored held-out file (12 problems) whose wrong steps are the long ones."""
    rng = random.Random(1)

    def solution(number: int, split: str) -> dict:
        count, first = rng.randint(3, 9), rng.choice([-1, 1, 2])  # many short right steps: length alone misleads
        steps = ["Short step." if i != first else "A much longer step that goes wrong somewhere." for i in range(count)]
        ratings = [1 if i < first or first == -1 else (-1 if i == first else 0) for i in range(count)]
        return {"prompt": f"Problem {number}", "problem_id": f"q{number}", "completions": steps, "ratings": ratings,
                "split": split}

    training = tmp_path / "train.jsonl"
    training.write_text("".join(json.dumps(solution(i, "train")) + "\n" for i in range(60)), encoding="utf-8")
    scored = tmp_path / "heldout_scored.jsonl"
    rows = []
    for i in range(36):
        row = solution(100 + i // 3, "test")
        row["problem"] = row["prompt"]
        row["step_scores"] = [rng.random() for _ in row["completions"]]  # a PRM that reads nothing
        rows.append(row)
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return training, scored


def test_step_level_rows_of_the_baselines_and_the_verdicts_that_name_the_strongest(
        client, campaign_admin, loop_campaign, tmp_path) -> None:
    training, scored = _held_out(tmp_path)
    metrics = held_out_step_metrics(scored, "positive", 0.5, training=training)
    baselines = metrics["baselines"]
    assert set(baselines["baselines"]) == {"length", "step_length", "position", "random"}
    assert baselines["strongest"]["first_error_f1"] == "step_length"  # the data's own rule, learned on training
    assert metrics["sibling_pairs"]["pairs"] > 0 and metrics["distinct_steps"] <= metrics["steps"]
    # twelve problems of a larger pool and enough labels of each class: the verdicts are given
    pool_file = tmp_path / "pool.jsonl"
    from annotate.models import Problem

    with pool_file.open("w", encoding="utf-8") as handle:
        for problem in Problem.objects.filter(campaign=loop_campaign).order_by("id")[:12]:
            for k in range(4):
                steps = _steps(problem.text, problem.answer, wrong=bool(k % 2))
                handle.write(json.dumps({"problem": problem.text, "steps": steps}) + "\n")
    pool, _ = import_pool(pool_file, f"{loop_campaign.slug}-twelve", campaign=loop_campaign)
    counts = {"prm": {"positive_steps": 400, "negative_steps": 90}, "orm": {"positive": 300, "negative": 120}}
    scorings = _scored(loop_campaign, pool, step_metrics=metrics, counts=counts)
    evaluate_scorings(loop_campaign, prm_scoring=scorings["prm"].pk, orm_scoring=scorings["orm"].pk, trials=50,
                      user=campaign_admin)
    page = _page(client, campaign_admin, loop_campaign)
    assert "data-verdict-withheld" not in page and "<div class=\"verdict\" data-verdict>" in page
    for name in ("length", "step_length", "position", "random"):
        row = re.search(rf'<tr data-baseline="{name}" data-baseline-of="{scorings["prm"].reward_model_id}".*?</tr>',
                        page, re.S)
        assert row, name
        for metric in ("step_auroc", "first_error_f1", "flawed_auroc"):
            value = re.search(rf'data-metric="{metric}">([^<]*)</td>', row.group(0))
            assert value and 0 <= float(value.group(1)) <= 100, (name, metric)
    said = [html.unescape(s) for s in re.findall(r"<p data-verdict-baseline[^>]*>(.*?)</p>", page, re.S)]
    assert any("base PRM, held-out solutions, paired over the same problem draws: PRM does not beat the strongest "
               "baseline on first-error F1: step length is ahead" in s for s in said), said
    assert any(s.startswith("Best-of-N: At N = 4 the strongest baseline is ") for s in said), said
    assert "sibling-pair accuracy" in page and "data-distinct-figures" in page
    # the training job's page shows the same comparison
    job_page = client.get(reverse("jobs:job", args=[scorings["prm"].reward_model.job_id])).content.decode()
    card = job_page[job_page.index('data-card="baselines"'):]
    assert all(f'<tr data-baseline="{name}">' in card for name in ("length", "step_length", "position", "random"))
    assert "PRM does not beat the strongest baseline on first-error F1: step length is ahead" in html.unescape(card)
    said = re.findall(r"<p data-threshold-in-force[^>]*>(.*?)</p>", page, re.S)
    assert said == ["base PRM: the threshold in force is 0.5: this PRM stores no threshold of its own (its training "
                    "split had no erroneous or no correct solution)."]
    RewardModel.objects.filter(pk=scorings["prm"].reward_model_id).update(metrics={"validation": {
        "threshold": 0.406, "calibration": {"folds": 5, "problems": 848, "f1_calibrated": 0.2, "f1_at_default": 0.15}}})
    said = re.findall(r"<p data-threshold-in-force[^>]*>(.*?)</p>", _page(client, campaign_admin, loop_campaign),
                      re.S)
    assert said == ["base PRM: the threshold in force is 40.6 %, chosen on 848 training problems cross-fitted over 5 "
                    "folds, where it beat 0.5 (first-error F1 there 20.0 % against 15.0 % at 0.5)."]


def test_a_head_jobs_progress_counts_its_iterations_not_the_budget(client, campaign_admin, loop_campaign) -> None:
    from tests.factories import TrainingJobFactory

    job = TrainingJobFactory(campaign=loop_campaign, status=JobStatus.SUCCEEDED, step=152, total_steps=300,
                             progress=1.0, metrics={"method": "head", "data": {"train": {"steps": 4821}},
                                                    "train": {"loss": 0.4}})
    client.login(username=campaign_admin.username, password=PASSWORD)
    page = client.get(reverse("jobs:job", args=[job.pk])).content.decode()
    counter = re.search(r"<span data-job-counter>(.*?)</span>", page, re.S)
    assert counter and counter.group(1) == ("fitted on 4821 labeled examples in 152 optimizer iterations (it stops "
                                            "when it converges; at most 300)")
    TrainingJobFactory._meta.model.objects.filter(pk=job.pk).update(metrics={"method": "finetune"})
    page = client.get(reverse("jobs:job", args=[job.pk])).content.decode()
    assert re.search(r"<span data-job-counter>(.*?)</span>", page, re.S).group(1) == "step 152 / 300"


def test_the_all_campaigns_dashboard_shows_one_campaigns_figures(client, campaign_admin, loop_campaign, loop_pool,
                                                                 labeler, tmp_path) -> None:
    from tests.loop.conftest import build_campaign, write_pool

    scorings = _scored(loop_campaign, loop_pool)
    evaluate_scorings(loop_campaign, prm_scoring=scorings["prm"].pk, orm_scoring=scorings["orm"].pk, trials=20,
                      user=campaign_admin)
    other = build_campaign(f"{loop_campaign.slug}-b", labeler)
    from annotate.models import Role
    from tests.factories import MembershipFactory

    MembershipFactory(campaign=other, user=campaign_admin, role=Role.ADMIN)
    other_pool, _ = import_pool(write_pool(tmp_path / "other.jsonl", other), f"{other.slug}-pool", campaign=other)
    newer = _scored(other, other_pool)
    evaluate_scorings(other, prm_scoring=newer["prm"].pk, orm_scoring=newer["orm"].pk, trials=20,
                      user=campaign_admin)
    client.login(username=campaign_admin.username, password=PASSWORD)
    page = client.get(reverse("jobs:dashboard")).content.decode()
    # the newest evaluation's campaign, and nothing of the other one in any figure
    assert f'data-figures-campaign="{other.slug}"' in page and f"<b>{other.slug}-pool</b>" in page
    assert f"{loop_campaign.slug}-pool" not in page

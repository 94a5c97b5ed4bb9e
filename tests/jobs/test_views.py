"""Pages: access matrix, starting and cancelling jobs, the htmx progress partial, the dashboard and downloads."""
from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.permissions import SYSTEM
from tests.conftest import FAST_HYPER

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(personas, graded_campaign):
    return personas(graded_campaign)


def _job(dataset_version):
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    return start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper=FAST_HYPER),
        user=SYSTEM)


@pytest.mark.parametrize("who, index, job_page, dashboard", [
    ("staff", 200, 200, 200), ("owner", 200, 200, 200), ("researcher", 200, 200, 200),
    ("labeler", 403, 404, 403), ("outsider", 403, 404, 403), ("other_admin", 200, 404, 404),
])
def test_access_matrix(client, users, dataset_version, who, index, job_page, dashboard) -> None:
    job = _job(dataset_version)
    client.force_login(users[who])
    assert client.get("/models/").status_code == index
    assert client.get(f"/models/jobs/{job.pk}/").status_code == job_page
    assert client.get(f"/models/jobs/{job.pk}/progress/").status_code == job_page
    assert client.post(f"/models/jobs/{job.pk}/cancel/").status_code in ((302,) if job_page == 200 else (job_page,))
    assert client.get(f"/models/dashboard/{dataset_version.campaign.slug}/").status_code == dashboard


def test_anonymous_is_sent_to_login(client, dataset_version) -> None:
    assert client.get("/models/").status_code == 302
    assert client.get("/models/dashboard/").url.startswith("/accounts/login/")


def test_other_campaigns_jobs_are_not_listed(client, users, dataset_version) -> None:
    job = _job(dataset_version)
    client.force_login(users["other_admin"])
    assert f'data-job="{job.pk}"' not in client.get("/models/").content.decode()
    client.force_login(users["researcher"])
    assert f'data-job="{job.pk}"' in client.get("/models/").content.decode()


def test_start_job_from_the_form(client, users, dataset_version, django_capture_on_commit_callbacks) -> None:
    from rewards.jobs.models import TrainingJob

    client.force_login(users["researcher"])
    page = client.get("/models/jobs/new/").content.decode()
    assert str(dataset_version) in page and 'value="default"' in page
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post("/models/jobs/new/", {"dataset_version": dataset_version.pk, "kind": "orm",
                                                     "base_model": "default", "backend": "local", "max_steps": 4,
                                                     "learning_rate": 1e-4, "batch_size": 2, "max_length": 128})
    job = TrainingJob.objects.get()
    assert response.status_code == 302 and response.url == f"/models/jobs/{job.pk}/"
    assert len(callbacks) == 1  # the Celery task is sent only after commit
    assert (job.kind, job.status, job.started_by, job.campaign) == ("orm", "queued", users["researcher"],
                                                                    dataset_version.campaign)
    assert job.config["max_steps"] == 4 and job.config["learning_rate"] == 1e-4
    assert job.dataset_path.endswith("outcome.jsonl") and job.config["dataset"] == job.dataset_path
    assert json.loads((__import__("pathlib").Path(job.work_dir) / "job.json").read_text()) == job.config


def test_bad_input_names_the_field(client, users, dataset_version) -> None:
    from rewards.jobs.models import TrainingJob
    from rewards.jobs.services.training import JobInputError, TrainingRequest, start_training_job

    client.force_login(users["owner"])
    response = client.post("/models/jobs/new/", {"dataset_version": dataset_version.pk, "kind": "prm",
                                                 "base_model": "nope", "backend": "local", "max_length": 8})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-error-for="max_length"' in html and 'data-error-for="base_model"' in html
    with pytest.raises(JobInputError) as bad:
        start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper={"lerning_rate": 1}),
            user=SYSTEM)
    assert bad.value.field == "lerning_rate"
    with pytest.raises(JobInputError) as bad:
        start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper={"epochs": -1}),
            user=SYSTEM)
    assert bad.value.field == "epochs" and "config key 'epochs' must be in" in str(bad.value)
    with pytest.raises(JobInputError) as bad:
        start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, base_model="/etc"), user=SYSTEM)
    assert bad.value.field == "base_model"
    dataset_version.files.pop("outcome")
    dataset_version.save()
    with pytest.raises(JobInputError, match="dataset_version: .* has no outcome or outcome-parquet file"):
        start_training_job(TrainingRequest(kind="orm", dataset_version=dataset_version), user=SYSTEM)
    assert not TrainingJob.objects.exists()


def test_progress_partial_polls_while_active_and_cancel_of_a_queued_job(client, users, dataset_version) -> None:
    job = _job(dataset_version)
    client.force_login(users["researcher"])
    partial = client.get(f"/models/jobs/{job.pk}/progress/").content.decode()
    assert 'hx-trigger="every 2s"' in partial and 'data-job-status="queued"' in partial
    response = client.post(f"/models/jobs/{job.pk}/cancel/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'data-job-status="cancelled"' in html and "hx-trigger" not in html
    job.refresh_from_db()
    assert job.status == "cancelled" and job.finished_at is not None


def test_job_page_shows_curve_metrics_and_error(client, users, dataset_version) -> None:
    from rewards.jobs.models import TrainingJob

    job = _job(dataset_version)
    TrainingJob.objects.filter(pk=job.pk).update(
        status="failed", error="the process exited with status 1\n--- stderr (tail) ---\nerror: boom",
        curve=[{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.7}],
        metrics={"train": {"loss": 0.8}, "validation": {"loss": 0.75, "solution_level": {"accuracy": 0.6}}})
    client.force_login(users["researcher"])
    html = client.get(f"/models/jobs/{job.pk}/").content.decode()
    assert 'id="curve-data"' in html and '"loss": 0.7' in html
    assert "boom (the process exited with status 1)" in html and "0.7500" in html  # the one-sentence reason
    assert "vendor/chartjs/chart.umd.js" in html


def _threshold_row(html: str) -> str:
    """The text of the page's ``tr[data-threshold]``, its whitespace collapsed."""
    from django.utils.html import strip_tags

    match = re.search(r"<tr data-threshold>(.*?)</tr>", html, re.S)
    assert match, "no tr[data-threshold] on the page"
    return re.sub(r"\s+", " ", strip_tags(match.group(1).replace("</td><td>", " "))).strip()


def test_a_prm_job_page_says_where_its_threshold_was_chosen(client, users, dataset_version) -> None:
    """The first-error threshold travels with the model: the page gives it, what chose it (the training problems,
    cross-fitted, or the validation split) and the validation F1 at it and at 0.5."""
    from rewards.jobs.models import TrainingJob

    job = _job(dataset_version)
    calibration = {"threshold": 0.406, "f1_calibrated": 0.161, "f1_at_default": 0.132, "folds": 5, "problems": 845,
                   "rows": 28941, "source": "training problems, cross-fitted"}
    intervals = {"problems": 103, "unit": "problems", "threshold": 0.406, "threshold_source": "model",
                 "first_error_f1_calibrated": {"value": 0.153, "low": 0.114, "high": 0.2},
                 "first_error_f1": {"value": 0.166, "low": 0.124, "high": 0.213},
                 "first_error_f1_gain": {"value": -0.013, "low": -0.04, "high": 0.015}}
    validation = {"step_level": {"auroc": 0.696}, "threshold": 0.406, "f1_calibrated": 0.153, "f1_at_default": 0.166,
                  "calibration": calibration}
    TrainingJob.objects.filter(pk=job.pk).update(status="succeeded",
                                                 metrics={"method": "head", "validation": validation})
    client.force_login(users["researcher"])
    row = _threshold_row(client.get(f"/models/jobs/{job.pk}/").content.decode())
    assert row == ("first-error threshold 40.6 %, chosen on 845 training problems in 5 folds, each scored by a fit "
                   "on the other folds (first-error F1 there 16.1 %, 13.2 % at 0.5) · validation first-error F1 "
                   "15.3 % at it, 16.6 % at 0.5")  # a model trained before the intervals: the figures alone
    TrainingJob.objects.filter(pk=job.pk).update(metrics={"method": "head",
                                                          "validation": {**validation, "intervals": intervals}})
    html = client.get(f"/models/jobs/{job.pk}/").content.decode()
    assert _threshold_row(html) == (
        "first-error threshold 40.6 %, chosen on 845 training problems in 5 folds, each scored by a fit on the "
        "other folds (first-error F1 there 16.1 %, 13.2 % at 0.5) · validation first-error F1 15.3 % (95 % CI "
        "11.4–20.0 %) at it, 16.6 % (12.4–21.3 %) at 0.5, intervals over the validation split's 103 problems "
        "First-error F1 at the threshold stored with the PRM (40.6 %) vs 0.5: no difference this data can show "
        "(-1.3 points, 95 % CI -4.0 to 1.5).")
    assert re.search(r'data-metric="f1_calibrated" data-ci-low="0.114" data-ci-high="0.2">15.3 %<', html)
    assert re.search(r'data-metric="f1_at_default" data-ci-low="0.124" data-ci-high="0.213">16.6 %<', html)
    assert re.search(r"<p data-threshold-verdict>First-error F1 at the threshold", html)
    validation.update(calibration={"source": "validation split"})
    TrainingJob.objects.filter(pk=job.pk).update(metrics={"method": "finetune", "validation": validation})
    row = _threshold_row(client.get(f"/models/jobs/{job.pk}/").content.decode())
    assert row.startswith("first-error threshold 40.6 %, chosen on the validation split · validation first-error F1")


def test_a_head_job_page_says_it_was_fitted_in_one_pass(client, users, dataset_version) -> None:
    """A head logs one loss point (its optimizer runs in one call): a sentence, not a chart with one dot, and no
    empty validation-loss or tokens/s cells; fine-tuning's several points still draw the chart."""
    from rewards.jobs.models import TrainingJob

    job = _job(dataset_version)
    TrainingJob.objects.filter(pk=job.pk).update(
        status="succeeded", curve=[{"step": 146, "loss": 0.5188}],
        metrics={"method": "head", "train": {"loss": 0.5188, "examples_per_s": 7295.31, "tokens_per_s": None},
                 "validation": {"step_level": {"accuracy": 0.856, "auroc": 0.696}}})
    client.force_login(users["researcher"])
    html = client.get(f"/models/jobs/{job.pk}/").content.decode()
    assert 'data-chart="loss"' not in html and "data-single-fit" in html
    assert "fitted in one pass over every label (146 optimizer iterations): training loss 0.5188" in html
    assert "validation loss" not in html and "tokens/s" not in html and "7295.3" in html
    metrics = {"method": "head", "train": {"loss": 0.5107, "trees": 200}, "validation": {}}
    TrainingJob.objects.filter(pk=job.pk).update(curve=[{"step": 146, "loss": 0.5107}], metrics=metrics)
    html = " ".join(client.get(f"/models/jobs/{job.pk}/").content.decode().split())
    assert "(146 optimizer iterations, and 200 boosted trees beside the regression): training loss 0.5107" in html
    TrainingJob.objects.filter(pk=job.pk).update(
        curve=[{"step": 10, "loss": 0.9}, {"step": 20, "loss": 0.7}],
        metrics={"method": "finetune", "train": {"loss": 0.7, "examples_per_s": 6.0, "tokens_per_s": 1300.0},
                 "validation": {"loss": 0.75}})
    html = client.get(f"/models/jobs/{job.pk}/").content.decode()
    assert 'data-chart="loss"' in html and "data-single-fit" not in html
    assert "validation loss" in html and "examples/s · tokens/s" in html and "1,300" in html


def test_registered_models_say_what_they_were_trained_on(client, users, dataset_version) -> None:
    """A PRM counts labeled steps in labeled paths (not "solutions"), an ORM its graded solutions, with thousands
    separators: the same words as the dashboard's step-level table."""
    from tests.factories import RewardModelFactory

    for kind, train in (("prm", {"steps": 41764}), ("orm", {})):
        RewardModelFactory(kind=kind, campaign=dataset_version.campaign, dataset_version=dataset_version,
                           name=f"{kind} model", location="/m", base_model="default",
                           trained_on=28999 if kind == "prm" else 807, metrics={"data": {"train": train}})
    client.force_login(users["researcher"])
    html = client.get("/models/").content.decode()
    cells = re.findall(r"<td data-trained-on>([^<]*)</td>", html)
    assert sorted(cells) == ["41,764 labeled steps in 28,999 labeled paths", "807 solutions"]


def test_evaluation_input_errors_name_the_field(scored_pool) -> None:
    from rewards.jobs.services.evaluation import evaluate_pool
    from rewards.jobs.services.training import JobInputError

    pool, scorings = scored_pool
    with pytest.raises(JobInputError, match="^prm_scoring: .* used a orm, not a prm"):
        evaluate_pool(pool, prm_scoring=scorings["orm"])
    with pytest.raises(JobInputError, match="^trials:"):
        evaluate_pool(pool, prm_scoring=scorings["prm"], trials=0)
    with pytest.raises(JobInputError, match="^ns:"):
        evaluate_pool(pool, prm_scoring=scorings["prm"], ns=[100])


def test_evaluation_matches_the_estimator_on_the_same_data(scored_pool) -> None:
    """Built independently from the stored rows: the run's figures are the estimator's on these pools."""
    from rewards.evaluation import Pool, best_of_n
    from rewards.jobs.models import Candidate
    from rewards.jobs.services.evaluation import evaluate_pool

    pool, scorings = scored_pool
    run = evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=300, seed=11,
                        aggregation="min")
    pools = []
    for pool_problem in pool.problems.order_by("index"):
        cands = list(Candidate.objects.filter(pool_problem=pool_problem).order_by("index"))
        prm = {s.candidate_id: s.score_min for s in scorings["prm"].scores.all()}
        orm = {s.candidate_id: s.score for s in scorings["orm"].scores.all()}
        pools.append(Pool.from_arrays([c.answer.strip() if c.answer else None for c in cands],
                                      [c.is_correct for c in cands], [prm[c.pk] for c in cands],
                                      [orm[c.pk] for c in cands]))
    expected = best_of_n(pools, trials=300, seed=11, pool_size=8)
    assert run.results["methods"] == expected["methods"]
    assert run.results["exact"] == expected["exact"]
    # pass@N is a property of the pool alone: the closed form, by hand, for N = pool size
    assert run.results["exact"]["pass"]["8"] == pytest.approx(
        sum(any(c.is_correct for c in pp.candidates.all()) for pp in pool.problems.all()) / 3)
    assert run.step_metrics["step_auroc"] == 0.75
    assert [p["trained_on"] for p in run.data_efficiency["prm"]] == [90]


def _runs(scored_pool, count: int) -> None:
    from rewards.jobs.services.evaluation import evaluate_pool

    pool, scorings = scored_pool
    for seed in range(count):
        evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=20, seed=seed)


def test_dashboard_query_count_is_flat(client, users, scored_pool) -> None:
    pool, _ = scored_pool
    client.force_login(users["researcher"])
    url = f"/models/dashboard/{pool.campaign.slug}/"
    _runs(scored_pool, 1)
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    _runs(scored_pool, 6)
    with CaptureQueriesContext(connection) as seven:
        html = client.get(url).content.decode()
    assert len(seven) == len(one), [q["sql"] for q in seven.captured_queries]
    assert html.count('data-n="') == 4 and "prm model" in html and 'data-chart="best-of-n"' in html
    with CaptureQueriesContext(connection) as global_page:
        assert client.get("/models/dashboard/").status_code == 200
    assert len(global_page) <= len(one) + 1


def test_figure_downloads(client, users, scored_pool) -> None:
    pool, _ = scored_pool
    _runs(scored_pool, 1)
    client.force_login(users["owner"])
    slug = pool.campaign.slug
    page = client.get(f"/models/dashboard/{slug}/").content.decode()
    for name in ("best-of-n", "step-metrics", "data-efficiency", "history"):
        assert f'data-download="{name}.csv"' in page and f'data-download="{name}.json"' in page
    data = client.get(f"/models/dashboard/{slug}/figures/best-of-n.json").json()
    assert [row["n"] for row in data["rows"]] == [1, 2, 4, 8]
    response = client.get(f"/models/dashboard/{slug}/figures/best-of-n.csv")
    assert response["Content-Disposition"] == f'attachment; filename="{slug}-best-of-n.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 4 and float(rows[-1]["pass_mean"]) == data["rows"][-1]["pass_mean"]
    steps = client.get(f"/models/dashboard/{slug}/figures/step-metrics.json").json()["rows"]
    assert steps[0]["processbench_f1"] == 0.615
    assert client.get(f"/models/dashboard/{slug}/figures/nope.json").status_code == 404
    client.force_login(users["other_admin"])
    assert client.get(f"/models/dashboard/{slug}/figures/best-of-n.json").status_code == 404


def test_a_scoring_job_page_gives_its_held_out_figures_with_intervals(client, users, scored_pool, tmp_path) -> None:
    """Percent, thousands separators and each figure's interval over the held-out problems, as the dashboard
    gives them: a reader of this page does not compare bare fractions."""
    from rewards.jobs.services.scoring import held_out_step_metrics

    _, scorings = scored_pool
    rows = [{"step_scores": [0.9, 0.2 + 0.01 * i, 0.8], "ratings": [1, -1 if i % 2 else 1, 1], "problem": f"p{i % 6}"}
            for i in range(1200)]
    path = tmp_path / "heldout_scored.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    metrics = held_out_step_metrics(path, "positive")
    scoring = scorings["prm"]
    type(scoring).objects.filter(pk=scoring.pk).update(step_metrics=metrics)
    client.force_login(users["researcher"])
    html = client.get(f"/models/scoring/{scoring.pk}/").content.decode()
    text = " ".join(re.search(r"<p data-heldout-figures>(.*?)</p>", html, re.S).group(1).split())
    auroc, f1 = metrics["intervals"]["step_auroc"], metrics["intervals"]["first_error_f1"]
    assert text.startswith("1,200 solutions of 6 problems, 3,600 steps")
    assert (f"step AUROC {100 * metrics['step_auroc']:.1f} % (95 % CI {100 * auroc['low']:.1f}–"
            f"{100 * auroc['high']:.1f})") in text
    assert f"first-error F1 at 0.5 {100 * f1['value']:.1f} % (95 % CI {100 * f1['low']:.1f}–" in text
    assert text.endswith("Intervals: a bootstrap over the held-out problems.")

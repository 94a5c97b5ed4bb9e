"""Every step of the loop from the browser's forms and from the REST API, through the same services."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate.permissions import SYSTEM
from rewards.jobs.models import CandidatePool, EvaluationRun, ScoringJob, TrainingJob
from rewards.models import DatasetVersion
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def _login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def _dashboard(campaign) -> str:
    return reverse("jobs:campaign_dashboard", args=[campaign.slug])


# --- snapshot ----------------------------------------------------------------------------------------

def test_snapshot_button_makes_a_version_once(client, campaign_admin, loop_campaign, storage) -> None:
    _login(client, campaign_admin)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    assert 'data-action="snapshot"' in page and "No dataset version yet" in page
    response = client.post(reverse("jobs:snapshot", args=[loop_campaign.slug]), follow=True)
    version = DatasetVersion.objects.get(campaign=loop_campaign)
    assert f"Dataset version {version} made." in response.content.decode()
    assert version.files["outcome"]["rows"] == 30 and version.files["trl-stepwise"]["rows"] == 30
    again = client.post(reverse("jobs:snapshot", args=[loop_campaign.slug]), follow=True).content.decode()
    assert "have not changed since" in again and DatasetVersion.objects.filter(campaign=loop_campaign).count() == 1


def test_snapshot_api(client, campaign_admin, loop_campaign, storage, make_user) -> None:
    url = reverse("jobs:api_snapshot", args=[loop_campaign.slug])
    outsider = make_user("outsider-snap")
    _login(client, outsider)
    assert client.post(url).status_code in (403, 404)
    _login(client, campaign_admin)
    first = client.post(url)
    assert first.status_code == 201 and first.json()["new"] is True and first.json()["number"] == 1
    second = client.post(url)
    assert second.status_code == 200 and second.json()["new"] is False and second.json()["id"] == first.json()["id"]


# --- pools -------------------------------------------------------------------------------------------

def test_pool_upload_page_imports_and_grades(client, campaign_admin, loop_campaign, pool_file: Path,
                                             storage) -> None:
    _login(client, campaign_admin)
    url = reverse("jobs:pool_upload", args=[loop_campaign.slug])
    assert 'type="file"' in client.get(url).content.decode()
    upload = SimpleUploadedFile("mine.jsonl", pool_file.read_bytes())
    response = client.post(url, {"file": upload, "name": "uploaded", "purpose": "evaluation", "split_rule": "auto"},
                           follow=True)
    pool = CandidatePool.objects.get(name="uploaded")
    assert (pool.campaign, pool.problem_count, pool.candidate_count, pool.pool_size) == (loop_campaign, 6, 24, 4)
    assert pool.source == "upload: mine.jsonl"
    assert pool.problems.first().candidates.filter(is_correct=True).count() == 2  # graded on import
    assert "Pool “uploaded”: 6 problems, 24 candidates (12 correct)." in response.content.decode()


def test_pool_upload_page_lists_every_rejected_line(client, campaign_admin, loop_campaign, storage) -> None:
    _login(client, campaign_admin)
    body = (json.dumps({"problem": "What is 1+1?", "steps": ["1+1=2", "# Answer\n\n2"]}) + "\n"
            + "{not json\n" + json.dumps({"problem": "What is 2+2?", "steps": "4"}) + "\n")
    response = client.post(reverse("jobs:pool_upload", args=[loop_campaign.slug]),
                           {"file": SimpleUploadedFile("bad.jsonl", body.encode()), "name": "bad"})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'data-rejected-line="2"' in page and 'data-rejected-line="3"' in page
    assert "bad.jsonl" in page and "steps" in page and "/tmp" not in page
    assert not CandidatePool.objects.filter(name="bad").exists()


def test_pool_upload_api(client, campaign_admin, loop_campaign, pool_file: Path, storage) -> None:
    _login(client, campaign_admin)
    url = reverse("jobs:api_pools", args=[loop_campaign.slug])
    created = client.post(url, {"file": SimpleUploadedFile("p.jsonl", pool_file.read_bytes()), "name": "api-pool"})
    assert created.status_code == 201, created.content
    assert created.json()["candidate_count"] == 24 and created.json()["report"]["created"]["correct"] == 12
    bad = client.post(url, {"file": SimpleUploadedFile("b.jsonl", b'{"problem": 3}\n'), "name": "api-bad"})
    assert bad.status_code == 400
    assert bad.json()["report"]["rejected"][0] == {"file": "b.jsonl", "line": 1, "field": "problem",
                                                   "message": "must be a string, got int"}
    assert [p["name"] for p in client.get(url).json()] == ["api-pool"]


# --- scoring -----------------------------------------------------------------------------------------

def test_score_form_and_api_start_scoring_jobs(client, campaign_admin, loop_campaign, hand_scored, loop_pool) -> None:
    _login(client, campaign_admin)
    prm = hand_scored["prm"].reward_model
    orm = hand_scored["orm"].reward_model
    before = ScoringJob.objects.count()
    response = client.post(reverse("jobs:score_start", args=[loop_campaign.slug]),
                           {"pool": loop_pool.pk, "models": [prm.pk, orm.pk]})
    assert response.status_code == 302
    new = ScoringJob.objects.filter(status="queued").order_by("id")
    assert ScoringJob.objects.count() == before + 2 and {j.reward_model_id for j in new} == {prm.pk, orm.pk}
    nothing = client.post(reverse("jobs:score_start", args=[loop_campaign.slug]), {"pool": loop_pool.pk})
    assert nothing.status_code == 400 and "choose at least one reward model" in nothing.content.decode()
    api = client.post(reverse("jobs:api_scoring", args=[loop_campaign.slug]),
                      {"pool": loop_pool.pk, "reward_models": [prm.pk]}, content_type="application/json")
    assert api.status_code == 201 and api.json()[0]["status"] == "queued"
    job_id = api.json()[0]["id"]
    assert client.get(reverse("jobs:api_scoring_job", args=[job_id])).json()["reward_model"] == prm.pk
    cancelled = client.post(reverse("jobs:api_scoring_job_cancel", args=[job_id]))
    assert cancelled.json()["status"] == "cancelled"
    wrong = client.post(reverse("jobs:api_scoring", args=[loop_campaign.slug]),
                        {"pool": loop_pool.pk, "reward_models": [999999]}, content_type="application/json")
    assert wrong.status_code == 400 and "no reward model 999999" in str(wrong.json())


def test_scoring_job_page_has_progress_and_cancel(client, campaign_admin, hand_scored) -> None:
    _login(client, campaign_admin)
    job = ScoringJob.objects.create(reward_model=hand_scored["prm"].reward_model, pool=hand_scored["prm"].pool)
    page = client.get(reverse("jobs:scoring_job", args=[job.pk])).content.decode()
    assert 'data-job-status="queued"' in page and "data-cancel" in page
    client.post(reverse("jobs:scoring_job_cancel", args=[job.pk]))
    job.refresh_from_db()
    assert job.status == "cancelled"


# --- evaluation --------------------------------------------------------------------------------------

def test_evaluate_form_fills_the_best_of_n_table(client, campaign_admin, loop_campaign, hand_scored) -> None:
    _login(client, campaign_admin)
    response = client.post(reverse("jobs:evaluate_start", args=[loop_campaign.slug]),
                           {"prm_scoring": hand_scored["prm"].pk, "orm_scoring": hand_scored["orm"].pk,
                            "aggregation": "product"})
    assert response.status_code == 302
    run = EvaluationRun.objects.get(campaign=loop_campaign)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    table = page[page.index('<table data-table="best-of-n" data-figure="best-of-n"'):]
    table = table[:table.index("</table>")]
    assert re.findall(r'<tr data-n="(\d+)">', table) == ["1", "2", "4"]
    for method in ("prm", "orm", "majority", "pass"):
        cells = re.findall(rf'<td data-ci-low="([^"]*)" data-ci-high="([^"]*)" data-method="{method}"[^>]*>'
                           r"([^<]*)</td>", table)
        assert len(cells) == 3, (method, cells)
        for low, high, value in cells:  # percent, inside its bootstrap interval over problems
            assert 0 <= float(low) <= float(value) <= float(high) <= 100, (method, low, value, high)
    # every problem has a right one
    assert float(re.findall(r'data-method="pass"[^>]*>([^<]*)</td>', table)[-1]) == 100.0
    assert "hand PRM" in page and f"pool “{run.pool.name}”" in page  # named under the chart
    # one unit on the page: the step-level figures in percent too (no interval stored with these hand figures)
    assert 'data-metric="step_auroc">81.2<' in page and 'data-metric="first_error_f1">66.7<' in page
    # six problems are too few for a verdict: the page says why in its place
    assert "data-verdict>" not in page and "best-of-N rests on 6 problems (fewer than 10)" in page


def test_evaluate_errors_and_api(client, campaign_admin, loop_campaign, hand_scored) -> None:
    _login(client, campaign_admin)
    empty = client.post(reverse("jobs:evaluate_start", args=[loop_campaign.slug]),
                        {"prm_scoring": "", "orm_scoring": ""})
    assert empty.status_code == 400 and "choose a PRM or an ORM scoring" in empty.content.decode()
    swapped = client.post(reverse("jobs:api_evaluations", args=[loop_campaign.slug]),
                          {"prm_scoring": hand_scored["orm"].pk}, content_type="application/json")
    assert swapped.status_code == 400 and "used a orm, not a prm" in str(swapped.json())
    made = client.post(reverse("jobs:api_evaluations", args=[loop_campaign.slug]),
                       {"prm_scoring": hand_scored["prm"].pk, "orm_scoring": hand_scored["orm"].pk, "trials": 50},
                       content_type="application/json")
    assert made.status_code == 201
    assert [row["n"] for row in made.json()["best_of_n"]] == [1, 2, 4]
    assert made.json()["step_metrics"]["step_auroc"] == 0.8125


# --- empty states ------------------------------------------------------------------------------------

def test_empty_states_offer_buttons_not_commands(client, campaign_admin, loop_campaign) -> None:
    _login(client, campaign_admin)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    assert "manage.py" not in page
    assert 'data-action="upload-pool"' in page and 'data-action="sample"' in page
    assert 'data-chart="best-of-n"' not in page and "No best-of-N figures yet" in page  # no empty axes
    refused = client.post(reverse("jobs:generation_start", args=[loop_campaign.slug]),
                          {"strategy": "random", "batch_size": "4"})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert "upload one" in text and "manage.py" not in text and 'data-action="upload-pool"' in text


def test_an_unlabeled_campaign_offers_each_role_only_what_it_may_do(client, make_user) -> None:
    """No labels yet: its labelers and admins are sent to label, its admins to invite labelers, and a researcher,
    who may do neither, is told whom to ask instead of being shown links that answer 403."""
    from annotate.models import Membership, Role
    from tests.factories import CampaignFactory

    campaign = CampaignFactory(slug="unlabeled-loop")
    admin, researcher = make_user("unlabeled-admin"), make_user("unlabeled-researcher")
    Membership.objects.create(campaign=campaign, user=admin, role=Role.ADMIN)
    Membership.objects.create(campaign=campaign, user=researcher, role=Role.RESEARCHER)
    _login(client, admin)
    page = client.get(_dashboard(campaign)).content.decode()
    assert "data-needs-labels" in page
    assert 'data-action="label-first"' in page and 'data-action="invite-labelers"' in page
    _login(client, researcher)
    page = client.get(_dashboard(campaign)).content.decode()
    assert "data-needs-labels" in page
    assert 'data-action="label-first"' not in page and 'data-action="invite-labelers"' not in page
    assert "ask one of its admins to add labelers" in page
    members = reverse("manage:members", args=[campaign.slug])
    assert members not in page and client.get(members).status_code == 403


def test_compare_without_a_pool_says_what_to_do(client, campaign_admin, loop_campaign) -> None:
    _login(client, campaign_admin)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    assert "has no candidate pool to pick best-of-N from yet" in page
    response = client.post(reverse("jobs:compare_start", args=[loop_campaign.slug]), {"max_steps": "5"})
    assert response.status_code == 400
    assert "has no candidate pool to pick best-of-N from: upload a pool or sample candidates first" in \
        response.content.decode()


def test_compare_form_validates_the_budget(client, campaign_admin, loop_campaign, loop_pool) -> None:
    _login(client, campaign_admin)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    assert 'name="max_steps"' in page and 'data-action="compare"' in page
    response = client.post(reverse("jobs:compare_start", args=[loop_campaign.slug]), {"max_steps": "many"})
    assert response.status_code == 400 and 'data-error-for="max_steps"' in response.content.decode()
    zero = client.post(reverse("jobs:api_comparisons", args=[loop_campaign.slug]), {"max_steps": 0},
                       content_type="application/json")
    assert zero.status_code == 400 and "max_steps" in zero.json()


def test_researcher_may_compare_outsider_may_not(client, loop_campaign, loop_pool, make_user) -> None:
    from annotate.models import Membership, Role

    researcher = make_user("res-loop")
    Membership.objects.create(campaign=loop_campaign, user=researcher, role=Role.RESEARCHER)
    outsider = make_user("out-loop")
    _login(client, outsider)
    response = client.post(reverse("jobs:compare_start", args=[loop_campaign.slug]), {"max_steps": "3"})
    assert response.status_code in (403, 404)
    _login(client, researcher)
    created = client.post(reverse("jobs:api_comparisons", args=[loop_campaign.slug]), {"max_steps": 3},
                          content_type="application/json")
    assert created.status_code == 201 and created.json()["status"] == "queued"
    again = client.post(reverse("jobs:api_comparisons", args=[loop_campaign.slug]), {"max_steps": 3},
                        content_type="application/json")
    assert again.status_code == 409 and "still queued" in str(again.json())
    run_id = created.json()["id"]
    cancelled = client.post(reverse("jobs:api_comparison_cancel", args=[run_id])).json()
    assert cancelled["status"] == "cancelled"
    page = client.get(_dashboard(loop_campaign)).content.decode()
    assert 'data-run-status="cancelled"' in page


# --- readable failures -------------------------------------------------------------------------------

def test_orm_on_an_ungraded_version_is_refused_in_one_sentence(labeler, storage, campaign_builder) -> None:
    from rewards.jobs.services.comparisons import snapshot_labels
    from rewards.jobs.services.training import JobInputError, TrainingRequest, start_training_job

    campaign = campaign_builder("loop-ungraded", labeler, graded=False)
    version, _ = snapshot_labels(campaign, user=SYSTEM)
    with pytest.raises(JobInputError) as error:
        start_training_job(TrainingRequest(kind="orm", dataset_version=version), user=SYSTEM)
    assert str(error.value) == ("dataset_version: the outcome dataset of loop-ungraded v1 has no rows: none of its "
                                "solutions has a graded final answer")
    assert not TrainingJob.objects.exists()


def test_a_comparison_scores_the_first_k_candidates_per_problem(loop_pool) -> None:
    from rewards.jobs.models import Candidate
    from rewards.jobs.services.comparisons import first_per_problem

    assert first_per_problem(loop_pool, 0) == loop_pool and first_per_problem(loop_pool, 4) == loop_pool
    subset = first_per_problem(loop_pool, 2)
    assert (subset.name, subset.campaign, subset.problem_count, subset.candidate_count, subset.pool_size) == (
        f"{loop_pool.name} · first 2 per problem", loop_pool.campaign, 6, 12, 2)
    copied = list(Candidate.objects.filter(pool_problem__pool=subset).values_list(
        "pool_problem__problem_id", "index", "is_correct", "steps").order_by("pool_problem__index", "index"))
    original = list(Candidate.objects.filter(pool_problem__pool=loop_pool, index__lt=2).values_list(
        "pool_problem__problem_id", "index", "is_correct", "steps").order_by("pool_problem__index", "index"))
    assert copied == original
    assert first_per_problem(loop_pool, 2) == subset  # made once, reused


def _run_at_training(campaign, pool, hand_scored):
    from django.utils import timezone

    from annotate.models import Role
    from rewards.jobs.models import ComparisonRun
    from tests.factories import MembershipFactory

    # its later stages act for its starter (a run without one, its account deleted, is refused)
    starter = MembershipFactory(campaign=campaign, role=Role.ADMIN).user
    return ComparisonRun.objects.create(campaign=campaign, max_steps=3, status="running", stage="train",
                                        started_at=timezone.now(), source_pool=pool, pool=pool, started_by=starter,
                                        prm_job=hand_scored["prm"].reward_model.job,
                                        orm_job=hand_scored["orm"].reward_model.job)


def test_reconcile_moves_a_run_whose_trainings_ended(loop_campaign, loop_pool, hand_scored) -> None:
    from rewards.jobs.services.comparisons import reconcile

    run = _run_at_training(loop_campaign, loop_pool, hand_scored)
    assert reconcile() == [run.pk]
    run.refresh_from_db()
    assert run.stage == "score" and run.status == "running"
    assert run.prm_scoring.reward_model == hand_scored["prm"].reward_model and run.prm_scoring.status == "queued"
    assert run.orm_scoring.pool == loop_pool
    assert reconcile() == []  # its scorings are still queued: nothing to do


def test_a_failed_training_fails_the_run_with_its_reason(loop_campaign, loop_pool, hand_scored) -> None:
    from rewards.jobs.services.comparisons import advance

    run = _run_at_training(loop_campaign, loop_pool, hand_scored)
    orm_job = hand_scored["orm"].reward_model.job
    type(orm_job).objects.filter(pk=orm_job.pk).update(
        status="failed",
        error="the process exited with status 1\n--- stderr (tail) ---\nTraceback …\nerror: out of memory")
    assert advance(run.pk) == "failed"
    run.refresh_from_db()
    assert run.error == f"training the ORM (job {orm_job.pk}) failed: out of memory (the process exited with status 1)"
    assert run.stage == "train" and run.prm_scoring is None


def test_the_next_comparison_starts_from_the_users_pool_not_a_subset(loop_pool) -> None:
    from rewards.jobs.services.comparisons import comparison_pool, first_per_problem

    subset = first_per_problem(loop_pool, 2)
    assert subset.pk != loop_pool.pk and comparison_pool(loop_pool.campaign) == loop_pool


# --- which pool a comparison scores -----------------------------------------------------------------------------

def test_compare_pool_choice_default_and_refusal(client, campaign_admin, loop_campaign) -> None:
    from rewards.jobs.models import ComparisonRun
    from rewards.jobs.services.comparisons import comparison_pool, comparison_pools
    from rewards.jobs.services.training import JobInputError
    from tests.factories import CandidatePoolFactory

    small = CandidatePoolFactory(campaign=loop_campaign, candidate_count=8)
    large = CandidatePoolFactory(campaign=loop_campaign, candidate_count=64)
    CandidatePoolFactory(campaign=loop_campaign, candidate_count=0)  # nothing to score: never offered
    elsewhere = CandidatePoolFactory(candidate_count=99)
    assert comparison_pools(loop_campaign) == [large, small] and comparison_pool(loop_campaign) == large
    small.comparison_default = True  # a loader (the demo) designates its default
    small.save(update_fields=["comparison_default"])
    assert comparison_pool(loop_campaign) == small and comparison_pool(loop_campaign, large.pk) == large
    with pytest.raises(JobInputError) as refused:
        comparison_pool(loop_campaign, elsewhere.pk)
    assert refused.value.field == "pool" and f"no candidate pool {elsewhere.pk}" in str(refused.value)
    _login(client, campaign_admin)
    page = client.get(_dashboard(loop_campaign)).content.decode()
    options = re.findall(r'<option value="(\d+)"( selected)?>', page[page.index('<select name="pool">'):])
    assert [int(pk) for pk, _ in options[:2]] == [small.pk, large.pk] and options[0][1] == " selected"
    refused_post = client.post(reverse("jobs:compare_start", args=[loop_campaign.slug]), {"pool": str(elsewhere.pk)})
    assert refused_post.status_code == 400 and 'data-error-for="pool"' in refused_post.content.decode()
    assert not ComparisonRun.objects.filter(campaign=loop_campaign).exists()
    made = client.post(reverse("jobs:compare_start", args=[loop_campaign.slug]), {"pool": str(large.pk)})
    assert made.status_code == 302 and ComparisonRun.objects.get(campaign=loop_campaign).source_pool == large


def test_held_out_figures_use_the_stored_threshold(tmp_path: Path) -> None:
    from rewards.evaluation import processbench_metrics
    from rewards.jobs.services.scoring import held_out_step_metrics

    rows = [{"step_scores": [0.9, 0.7, 0.95], "ratings": [1, -1, 1]}, {"step_scores": [0.9, 0.8], "ratings": [1, 1]},
            {"step_scores": [0.6, 0.9], "ratings": [-1, 1]}, {"step_scores": [0.95, 0.85], "ratings": [1, 1]}]
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    plain = held_out_step_metrics(path, "positive")
    calibrated = held_out_step_metrics(path, "positive", 0.75)
    assert plain["threshold"] == 0.5 and not plain["calibrated"] and plain["processbench"]["f1"] == 0.0
    expected = processbench_metrics([1, -1, 0, -1], step_scores=[r["step_scores"] for r in rows], threshold=0.75)
    assert calibrated["calibrated"] and calibrated["processbench_calibrated"]["f1"] == pytest.approx(expected["f1"])
    assert calibrated["processbench_calibrated"]["f1"] == 1.0 and calibrated["processbench"]["f1"] == 0.0
    intervals = calibrated["intervals"]
    assert intervals["threshold"] == 0.75 and intervals["first_error_f1_calibrated"]["value"] == 1.0
    assert plain["problems"] is None and intervals["unit"] == "solutions"  # the rows name no problem
    named = tmp_path / "named.jsonl"
    named.write_text("".join(json.dumps({**r, "problem": "ab"[i // 2]}) + "\n" for i, r in enumerate(rows)),
                     encoding="utf-8")
    grouped = held_out_step_metrics(named, "positive", 0.75)
    assert grouped["problems"] == 2 and grouped["intervals"]["unit"] == "problems"
    assert grouped["intervals"]["problems"] == 2 and grouped["step_auroc"] == calibrated["step_auroc"]


def test_the_dashboard_says_what_the_stored_threshold_buys_over_half(client, campaign_admin, loop_campaign,
                                                                     hand_scored) -> None:
    """One paired sentence per PRM under the step-level table; when the threshold was not chosen on the training
    problems (a fine-tuned model's validation split may be the scored split), the sentence says so."""
    from rewards.jobs.models import RewardModel, ScoringJob

    scoring = hand_scored["prm"]
    intervals = {"unit": "problems", "problems": 4, "threshold": 0.406, "threshold_source": "model",
                 "first_error_f1": {"value": 0.166, "low": 0.124, "high": 0.213},
                 "first_error_f1_calibrated": {"value": 0.153, "low": 0.114, "high": 0.2},
                 "first_error_f1_gain": {"value": -0.013, "low": -0.047, "high": 0.025}}
    ScoringJob.objects.filter(pk=scoring.pk).update(step_metrics={**scoring.step_metrics, "threshold": 0.406,
                                                                  "calibrated": True, "intervals": intervals})
    _login(client, campaign_admin)

    def sentences() -> list[str]:
        page = client.get(_dashboard(loop_campaign)).content.decode()
        return [html.unescape(found) for found in
                re.findall(rf'<p data-threshold-verdict data-model="{scoring.reward_model_id}">(.*?)</p>', page, re.S)]

    head_metrics = {"validation": {"threshold": 0.406, "calibration": {"folds": 5, "problems": 848,
                                                                     "source": "training problems, cross-fitted"}}}
    RewardModel.objects.filter(pk=scoring.reward_model_id).update(metrics=head_metrics)
    assert sentences() == ["hand PRM, paired over the same problem draws: First-error F1 at the threshold stored with "
                           "the PRM (40.6 %) vs 0.5: no difference this data can show (-1.3 points, 95 % CI -4.7 to "
                           "2.5)."]
    RewardModel.objects.filter(pk=scoring.reward_model_id).update(metrics={"validation": {"threshold": 0.406}})
    [fine_tuned] = sentences()
    assert fine_tuned.endswith("(-1.3 points, 95 % CI -4.7 to 2.5); this PRM's threshold was chosen on its validation "
                               "split, which may hold these solutions: the column of a threshold chosen on other "
                               "held-out problems is the fair comparison.")
    ScoringJob.objects.filter(pk=scoring.pk).update(step_metrics=scoring.step_metrics)  # scored before the gain
    assert sentences() == []

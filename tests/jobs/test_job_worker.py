"""The Celery path for real: a worker on Redis starts the trainer/scorer as subprocesses (CPU MiniLM)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from annotate.permissions import SYSTEM
from tests.conftest import FAST_HYPER

pytestmark = [pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]


def _status(job):
    job.refresh_from_db()
    return job.status


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_train_score_evaluate_prm_and_orm(celery_worker_process, dataset_version, aime_pool_file, wait_for,
                                          tmp_path: Path) -> None:
    from rewards.jobs.models import CandidateScore, JobStatus, RewardModel
    from rewards.jobs.services.evaluation import evaluate_pool, scored_sample_rows
    from rewards.jobs.services.pools import import_pool
    from rewards.jobs.services.scoring import start_scoring_job
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    prm_job = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper=FAST_HYPER),
        user=SYSTEM)
    orm_job = start_training_job(TrainingRequest(kind="orm", dataset_version=dataset_version, hyper=FAST_HYPER),
        user=SYSTEM)
    seen = set()
    wait_for(lambda: seen.add(_status(prm_job)) or prm_job.status in ("succeeded", "failed", "cancelled"),
             timeout=300, every=0.2, what="the PRM job to end")
    assert "running" in seen
    assert prm_job.status == JobStatus.SUCCEEDED, prm_job.error
    wait_for(lambda: _status(orm_job) in ("succeeded", "failed"), timeout=300, what="the ORM job to end")
    assert orm_job.status == JobStatus.SUCCEEDED, orm_job.error

    for job in (prm_job, orm_job):
        assert job.progress == 1.0 and job.step == 3 and job.total_steps == 3
        assert [point["step"] for point in job.curve][-1] == 3 and all(p["loss"] > 0 for p in job.curve)
        assert job.metrics["train"]["steps"] == 3 and job.metrics["validation"]["solution_level"]["count"] > 0
        assert job.started_at and job.finished_at and job.heartbeat_at and job.external_id
        model = RewardModel.objects.get(job=job)
        assert model.kind == job.kind and model.dataset_version == dataset_version
        assert model.trained_on == job.metrics["data"]["train"]["rows_used"] > 0
        assert (Path(model.location) / "model.safetensors").is_file()
    assert prm_job.metrics["validation"]["step_level"]["count"] > 0

    pool, report = import_pool(aime_pool_file, "aime-small", campaign=dataset_version.campaign)
    assert report.created["candidates"] == 24
    scorings = {kind: start_scoring_job(RewardModel.objects.get(job=job), pool=pool, user=SYSTEM)
                for kind, job in (("prm", prm_job), ("orm", orm_job))}
    for scoring in scorings.values():
        # Waited for within this iteration: the closure never outlives its `scoring`.
        wait_for(lambda: _status(scoring) in ("succeeded", "failed"),  # noqa: B023
                 timeout=300, what="a scoring job to end")
        assert scoring.status == JobStatus.SUCCEEDED, scoring.error
        assert CandidateScore.objects.filter(scoring_job=scoring).count() == 24
    prm_scores = CandidateScore.objects.filter(scoring_job=scorings["prm"])
    for score in prm_scores:
        assert 0 < score.score <= score.score_min <= 1 or score.score == pytest.approx(score.score_min)
        assert len(score.step_scores) == len(score.candidate.steps)
    step_metrics = scorings["prm"].step_metrics
    assert step_metrics["solutions"] > 0 and 0 <= step_metrics["step_auroc"] <= 1
    assert set(step_metrics["processbench"]) >= {"error_acc", "correct_acc", "f1"}
    # the intervals draw the held-out problems the version's file names, each with all its solutions
    version_rows = [json.loads(line) for line in Path(prm_job.dataset_path).read_text(encoding="utf-8").splitlines()]
    held_problems = {row["problem_id"] for row in version_rows if row["split"] == "test"}
    scored = [json.loads(line) for line in (Path(scorings["prm"].work_dir) / "heldout.jsonl").open(encoding="utf-8")]
    assert len(scored) == step_metrics["solutions"] and {row["problem"] for row in scored} <= held_problems
    assert step_metrics["problems"] == len({row["problem"] for row in scored}) < len(scored)
    assert step_metrics["intervals"]["unit"] == "problems"
    assert step_metrics["intervals"]["problems"] == step_metrics["problems"]
    assert step_metrics["intervals"]["crossfit_folds"] == min(5, step_metrics["problems"])
    crossfit = step_metrics["intervals"]["first_error_f1_crossfit"]
    assert crossfit["low"] <= crossfit["value"] <= crossfit["high"]
    gain, at_it, at_half = (step_metrics["intervals"][name] for name in
                            ("first_error_f1_gain", "first_error_f1_calibrated", "first_error_f1"))
    assert gain["value"] == pytest.approx(at_it["value"] - at_half["value"])
    assert gain["low"] <= gain["value"] <= gain["high"]

    run = evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=200, seed=3)
    # The same figures from the estimator's own CLI on the run's rows in the paper's layout.
    samples = tmp_path / "scored-test-samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in scored_sample_rows(pool, scorings["prm"],
                                                                               scorings["orm"])))
    out = tmp_path / "bon.json"
    subprocess.run([sys.executable, "-m", "rewards.evaluation", "best-of-n", "--samples", str(samples),
                    "--trials", "200", "--seed", "3", "--out", str(out)], check=True)
    cli = json.loads(out.read_text())
    for method in ("prm", "orm", "majority", "pass"):
        for n, figure in cli["methods"][method].items():
            assert run.results["methods"][method][n]["mean"] == pytest.approx(figure["mean"])
            assert run.results["methods"][method][n]["std"] == pytest.approx(figure["std"])
    assert run.results["ns"] == [1, 2, 4, 8]
    assert run.results["exact"]["pass"]["8"] == pytest.approx(run.results["methods"]["pass"]["8"]["mean"])
    assert {p["model_id"] for p in run.data_efficiency["prm"]} == {scorings["prm"].reward_model_id}


def test_cancel_stops_the_training_process(celery_worker_process, dataset_version, wait_for) -> None:
    from rewards.jobs.models import JobStatus, RewardModel
    from rewards.jobs.services.training import TrainingRequest, request_cancel, start_training_job

    job = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version,
                                             hyper={**FAST_HYPER, "max_steps": 5000}), user=SYSTEM)
    wait_for(lambda: _status(job) == "running" and job.step >= 1, timeout=300, every=0.3,
             what="training to report a step")
    pid = int(job.external_id)
    assert not _gone(pid)
    assert request_cancel(job) == JobStatus.RUNNING and job.cancel_requested
    wait_for(lambda: _status(job) == JobStatus.CANCELLED, timeout=60, what="the job to be cancelled")
    wait_for(lambda: _gone(pid), timeout=30, what="the process to exit")
    assert not RewardModel.objects.filter(job=job).exists()
    assert job.finished_at is not None and job.step < 5000


def test_crashing_training_process_fails_with_its_stderr(celery_worker_process, admin_user, tmp_path: Path,
                                                         wait_for) -> None:
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    bad = tmp_path / "bad.jsonl"
    good = {"prompt": "1+1?", "completions": ["1+1=2", "# Answer\n\n2"], "labels": [True, True], "split": "train"}
    bad.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n"
                   + json.dumps({**good, "labels": [True]}) + "\n")
    job = start_training_job(TrainingRequest(kind="prm", dataset_path=bad, hyper=FAST_HYPER), user=admin_user)
    wait_for(lambda: _status(job) in ("failed", "succeeded"), timeout=180, what="the job to end")
    assert job.status == "failed"
    assert "exited with status 1" in job.error
    assert "line 3: field 'labels'" in job.error  # the trainer's own message, from stderr
    assert "Traceback" in job.log_tail


def test_reaper_fails_a_job_whose_worker_is_lost(celery_worker_process, dataset_version, tmp_path: Path,
                                                 wait_for, settings) -> None:
    from rewards.jobs.backends import Launch, LocalBackend
    from rewards.jobs.models import JobStatus
    from rewards.jobs.tasks import reap_stale_jobs
    from tests.factories import TrainingJobFactory

    # A job whose watcher died: "running", a process still there, heartbeats stopped 10 minutes ago.
    work = tmp_path / "lost"
    process_id = LocalBackend().submit(Launch(name="lost", work_dir=work, commands=[["sleep", "600"]]))
    stale = timezone.now() - timedelta(minutes=10)
    job = TrainingJobFactory(kind="prm", dataset_version=dataset_version, dataset_path="x.jsonl",
                             status=JobStatus.RUNNING, started_at=stale, heartbeat_at=stale, work_dir=str(work),
                             output_dir=str(work / "output"), external_id=process_id, attempts=1)
    fresh = TrainingJobFactory(kind="orm", dataset_version=dataset_version, dataset_path="x.jsonl",
                               status=JobStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now(),
                               work_dir=str(work), attempts=1)
    result = reap_stale_jobs.delay().get(timeout=60)
    assert result["training"] == [job.pk]
    job.refresh_from_db()
    fresh.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.error.startswith("worker lost: no heartbeat since")
    assert job.finished_at is not None
    assert fresh.status == JobStatus.RUNNING
    LocalBackend().poll(Launch(name="lost", work_dir=work, commands=[]), process_id)  # reap our zombie
    wait_for(lambda: _gone(int(process_id)), timeout=30, what="the orphaned process to be stopped")
    assert os.path.exists(work / "run.sh")

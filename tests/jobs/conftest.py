"""Fixtures for reward-model jobs: a real campaign imported from PRM800K, exported into a dataset version.

Data: the PRM800K phase-1 test trajectories (101 problems, real human step ratings), imported with the
project's own importer and exported with ``rewards.exports.export_campaign`` into Django's default
storage, as the dataset-version builder does. The reconstructed rows carry no grader verdict, so a
solution's ``is_correct`` (needed by the outcome format) is set from the labeler's finish reason
("solution": every step through the answer rated acceptable), as tests/training does. Phase-1
trajectories carry no −1 step (negatives are only among the alternatives), so the 10 genuine phase-2
rows are imported too; export seed 3 with a 30 % test split puts 2 of their −1 steps in the test split.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PRM800K_TEST = "prm800k/phase1_test_reconstructed.jsonl"
PRM800K_GENUINE = "prm800k/genuine_rows.jsonl"
FAST_HYPER = {"max_steps": 3, "batch_size": 4, "max_length": 128, "logging_steps": 1}


def make_version(campaign: Any, *, test_fraction: float = 0.3, seed: int = 3, number: int = 1) -> Any:
    """Export a campaign's labels into storage and record a ready DatasetVersion for them."""
    from django.core.files.storage import default_storage

    from rewards.exports import ExportOptions, export_campaign
    from rewards.models import DatasetVersion

    folder = f"test-jobs/{campaign.slug}-{uuid.uuid4().hex[:8]}/v{number}"
    files = {}
    for fmt in ("trl-stepwise", "outcome"):
        name = f"{folder}/{fmt}.jsonl"
        written = export_campaign(campaign, fmt, Path(default_storage.path(name)),
                                  ExportOptions(seed=seed, test_fraction=test_fraction))
        files[fmt] = {"name": name, "sha256": written.sha256, "bytes": written.size, "rows": written.rows}
    return DatasetVersion.objects.create(campaign=campaign, number=number, status=DatasetVersion.Status.READY,
                                         content_sha256=uuid.uuid4().hex, folder=folder, files=files)


@pytest.fixture
def labeled_campaign(campaign_factory, shared_data: Path):  # type: ignore[no-untyped-def]
    from annotate.models import Assignment, Solution
    from annotate.prm800k import import_prm800k

    campaign = campaign_factory(f"jobs-{uuid.uuid4().hex[:6]}")
    import_prm800k(shared_data / PRM800K_TEST, campaign, skip_invalid=True)  # 4 rows: "give_up_or_unknown"
    import_prm800k(shared_data / PRM800K_GENUINE, campaign)  # phase-2 rows: their -1 steps are the negatives
    solved = Assignment.objects.filter(solution__campaign=campaign, finish_reason="solution").values("solution_id")
    Solution.objects.filter(campaign=campaign).update(is_correct=False)
    Solution.objects.filter(pk__in=solved).update(is_correct=True)
    return campaign


@pytest.fixture
def dataset_version(labeled_campaign):  # type: ignore[no-untyped-def]
    return make_version(labeled_campaign)


@pytest.fixture
def aime_pool_file(tmp_path: Path, shared_data: Path) -> Path:
    """Three AIME 2025 problems x 8 candidates from the shared best-of-N pool (small enough to score on CPU)."""
    out = tmp_path / "aime_small.jsonl"
    with (shared_data / "bestofn/aime2025_I_k64.jsonl").open(encoding="utf-8") as src, out.open("w") as dst:
        for number, line in enumerate(src):
            if number == 3:
                break
            row = json.loads(line)
            for key in ("generated_responses", "generated_answers"):
                row[key] = row[key][:8]
            dst.write(json.dumps(row) + "\n")
    return out


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    def wait(predicate: Callable[[], Any], timeout: float = 120, every: float = 0.5, what: str = "condition") -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(every)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    return wait


@pytest.fixture
def researcher(make_user, labeled_campaign):  # type: ignore[no-untyped-def]
    from annotate.models import Membership, Role

    user = make_user(f"res-{uuid.uuid4().hex[:6]}")
    Membership.objects.create(campaign=labeled_campaign, user=user, role=Role.RESEARCHER)
    return user


@pytest.fixture
def scored_pool(dataset_version, aime_pool_file):  # type: ignore[no-untyped-def]
    """A pool with stored PRM and ORM scores from registered models (rows written directly: no training),
    scores drawn from a seeded generator and made informative (correct candidates score higher)."""
    import random

    from rewards.jobs.models import CandidateScore, JobStatus, RewardModel, ScoringJob, TrainingJob
    from rewards.jobs.services.pools import import_pool

    pool, _ = import_pool(aime_pool_file, f"aime-{uuid.uuid4().hex[:6]}", campaign=dataset_version.campaign)
    rng = random.Random(7)
    scorings = {}
    for kind in ("prm", "orm"):
        job = TrainingJob.objects.create(kind=kind, campaign=dataset_version.campaign, dataset_version=dataset_version,
                                         dataset_path="/x.jsonl", status=JobStatus.SUCCEEDED, progress=1.0)
        model = RewardModel.objects.create(job=job, kind=kind, campaign=dataset_version.campaign,
                                           dataset_version=dataset_version, name=f"{kind} model", location="/m",
                                           base_model="default", trained_on=90,
                                           metrics={"validation": {"step_level": {"auroc": 0.7}}})
        scoring = ScoringJob.objects.create(reward_model=model, pool=pool, status=JobStatus.SUCCEEDED,
                                            step_metrics={"solutions": 5, "steps": 40, "step_auroc": 0.75,
                                                          "processbench": {"error_acc": 0.5, "correct_acc": 0.8,
                                                                           "f1": 0.615}} if kind == "prm" else {})
        scores = []
        for candidate in pool.problems.first().candidates.model.objects.filter(pool_problem__pool=pool):
            base = rng.random() * 0.6 + (0.35 if candidate.is_correct else 0.0)
            steps = [min(base + rng.random() * 0.05, 1.0) for _ in candidate.steps] if kind == "prm" else None
            scores.append(CandidateScore(scoring_job=scoring, candidate=candidate, score=base,
                                         score_min=min(steps) if steps else None, step_scores=steps))
        CandidateScore.objects.bulk_create(scores)
        scorings[kind] = scoring
    return pool, scorings


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}

"""Fixtures for reward-model jobs: a researcher of the graded PRM800K campaign, and a pool with stored scores.

The campaign and its exported dataset version (``graded_campaign``, ``dataset_version``) and the small AIME
pool (``aime_pool_file``) live in tests/conftest.py, shared with tests/labeling_rounds.
"""
from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def researcher(make_user, graded_campaign):
    from annotate.models import Role
    from tests.factories import MembershipFactory

    user = make_user(f"res-{uuid.uuid4().hex[:6]}")
    MembershipFactory(campaign=graded_campaign, user=user, role=Role.RESEARCHER)
    return user


@pytest.fixture
def scored_pool(dataset_version, aime_pool_file):
    """A pool with stored PRM and ORM scores from registered models (rows written directly: no training),
    scores drawn from a seeded generator and made informative (correct candidates score higher)."""
    import random

    from rewards.jobs.models import JobStatus
    from rewards.jobs.services.pools import import_pool
    from tests.factories import CandidateScoreFactory, RewardModelFactory, ScoringJobFactory

    pool, _ = import_pool(aime_pool_file, f"aime-{uuid.uuid4().hex[:6]}", campaign=dataset_version.campaign)
    rng = random.Random(7)
    scorings = {}
    for kind in ("prm", "orm"):
        model = RewardModelFactory(kind=kind, campaign=dataset_version.campaign, dataset_version=dataset_version,
                                   name=f"{kind} model", location="/m", base_model="default", trained_on=90,
                                   metrics={"validation": {"step_level": {"auroc": 0.7}}},
                                   job__dataset_path="/x.jsonl", job__status=JobStatus.SUCCEEDED, job__progress=1.0)
        scoring = ScoringJobFactory(reward_model=model, pool=pool, status=JobStatus.SUCCEEDED,
                                    step_metrics={"solutions": 5, "steps": 40, "step_auroc": 0.75,
                                                  "processbench": {"error_acc": 0.5, "correct_acc": 0.8,
                                                                   "f1": 0.615}} if kind == "prm" else {})
        for candidate in pool.problems.first().candidates.model.objects.filter(pool_problem__pool=pool):
            base = rng.random() * 0.6 + (0.35 if candidate.is_correct else 0.0)
            steps = [min(base + rng.random() * 0.05, 1.0) for _ in candidate.steps] if kind == "prm" else None
            CandidateScoreFactory(scoring_job=scoring, candidate=candidate, score=base,
                                  score_min=min(steps) if steps else None, step_scores=steps)
        scorings[kind] = scoring
    return pool, scorings


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}

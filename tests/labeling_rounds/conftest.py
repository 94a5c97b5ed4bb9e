"""Fixtures for active-learning generations.

A hand-built scored pool (three problems, eleven candidates with chosen scores and verdicts) lets each
strategy's choice be worked out by hand. The end-to-end fixtures (``graded_campaign``, its
``dataset_version``, ``aime_pool_file``) live in tests/conftest.py, shared with tests/jobs.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# name: (problem, PRM score, final answer correct?, has steps?)
HAND_POOL = {
    "a": (1, 0.95, False, True), "b": (1, 0.90, False, True), "c": (1, 0.85, False, True),
    "d": (1, 0.99, True, True), "e": (1, 0.50, False, True),
    "f": (2, 0.80, False, True), "g": (2, 0.40, False, True), "h": (2, 0.55, True, True),
    "i": (3, 0.70, True, True), "j": (3, 0.30, False, True), "k": (3, 0.52, False, False),
}


@dataclass
class HandPool:
    campaign: Any
    pool: Any
    prm: Any
    candidates: dict[str, Any]  # name -> Candidate

    def name_of(self, candidate_id: int) -> str:
        return next(name for name, c in self.candidates.items() if c.pk == candidate_id)

    def run(self, strategy: str, batch_size: int, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Start a generation through the service, write the scores the scorer would write (open candidates
        with steps only), end the scoring job as the watcher does, and call the completion hook."""
        from annotate.permissions import SYSTEM
        from rewards.jobs.models import JobStatus
        from rewards.jobs.services import runner
        from rewards.jobs.services.labeling_rounds import scoring_finished, start_labeling_round
        from tests.factories import CandidateScoreFactory

        generation = start_labeling_round(self.campaign, strategy=strategy, batch_size=batch_size, config=config,
                                          **{"user": SYSTEM, **kwargs})
        job = generation.scoring_job
        assert job is not None and job.status == JobStatus.QUEUED
        for name, c in self.candidates.items():
            if c.steps and not type(c).objects.get(pk=c.pk).solution_id:
                score = HAND_POOL[name][1]
                CandidateScoreFactory(scoring_job=job, candidate=c, score=score, score_min=score,
                                      step_scores=[score] * len(c.steps))
        assert runner.claim(type(job), job.pk) is not None
        assert runner.finish(job, JobStatus.SUCCEEDED)
        return scoring_finished(job.pk)


def make_prm(campaign: Any, *, auroc: float | None = 0.7, version: Any = None, name: str = "hand PRM") -> Any:
    """A registered PRM row (no weights: the hand-built tests never run it)."""
    from rewards.jobs.models import JobStatus
    from tests.factories import RewardModelFactory

    return RewardModelFactory(kind="prm", campaign=campaign, dataset_version=version, name=name, location="/m",
                              base_model="default", trained_on=10,
                              metrics={"validation": {"step_level": {"auroc": auroc},
                                                      "solution_level": {"accuracy": 0.6}}},
                              job__dataset_path="/x.jsonl", job__status=JobStatus.SUCCEEDED, job__progress=1.0)


@pytest.fixture
def hand_pool(campaign_factory) -> HandPool:
    from rewards.jobs.models import PoolPurpose
    from tests.factories import CandidateFactory, CandidatePoolFactory, PoolProblemFactory

    campaign = campaign_factory(f"gen-{uuid.uuid4().hex[:6]}")
    pool = CandidatePoolFactory(name=f"hand-{campaign.slug}", campaign=campaign, purpose=PoolPurpose.LABELING,
                                problem_count=3, candidate_count=len(HAND_POOL), pool_size=5)
    problems = {n: PoolProblemFactory(pool=pool, index=n, problem__text=f"Problem {n} {campaign.slug}: 2+{n}?",
                                      problem__answer=str(2 + n)) for n in (1, 2, 3)}
    candidates = {}
    for index, (name, (problem, _score, correct, has_steps)) in enumerate(HAND_POOL.items()):
        answer = str(2 + problem) if correct else "-1"
        steps = [f"Step one of {name}.", f"Step two of {name}.", f"# Answer\n\n{answer}"] if has_steps else []
        candidates[name] = CandidateFactory(pool_problem=problems[problem], index=index, text="\n\n".join(steps),
                                            steps=steps, answer=answer, is_correct=correct)
    return HandPool(campaign=campaign, pool=pool, prm=make_prm(campaign), candidates=candidates)


@pytest.fixture
def campaign_admin(make_user, hand_pool):
    from annotate.models import Role
    from tests.factories import MembershipFactory

    user = make_user(f"adm-{uuid.uuid4().hex[:6]}")
    MembershipFactory(campaign=hand_pool.campaign, user=user, role=Role.ADMIN)
    return user

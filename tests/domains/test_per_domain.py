"""Best-of-N per domain: an evaluation of a pool whose problems span domains carries each domain's figures, its
intervals and its paired PRM − ORM verdict; the dashboard's per-domain rows read them. Scores are written
directly (evaluation needs scores, not the models that made them)."""
from __future__ import annotations

from typing import Any

import pytest

from rewards.jobs.models import JobStatus
from rewards.jobs.selectors import domain_rows
from rewards.jobs.services.evaluation import evaluate_pool
from tests.factories import (
    CampaignFactory,
    CandidateFactory,
    CandidatePoolFactory,
    CandidateScoreFactory,
    PoolProblemFactory,
    ProblemFactory,
    RewardModelFactory,
    ScoringJobFactory,
)

pytestmark = pytest.mark.django_db


def _pool(subjects: list[str]) -> tuple[Any, dict[str, Any]]:
    """Two answers per problem. A "law" problem has a right (A) and a wrong (B) answer; the PRM ranks the right one
    first, the ORM the wrong one. Any other problem has two wrong answers."""
    campaign = CampaignFactory()
    pool = CandidatePoolFactory(campaign=campaign, problem_count=len(subjects), candidate_count=2 * len(subjects),
                                pool_size=2)
    scorings = {}
    for kind in ("prm", "orm"):
        model = RewardModelFactory(kind=kind, campaign=campaign, location="/nowhere", base_model="default",
                                   trained_on=10, job__dataset_path="/x.jsonl", job__status=JobStatus.SUCCEEDED,
                                   job__progress=1.0)
        scorings[kind] = ScoringJobFactory(reward_model=model, pool=pool, status=JobStatus.SUCCEEDED)
    for index, subject in enumerate(subjects):
        problem = ProblemFactory(campaign=campaign, subject=subject, answer="A")
        pool_problem = PoolProblemFactory(pool=pool, problem=problem, index=index)
        answers = ("A", "B") if subject == "law" else ("B", "C")
        for position, answer in enumerate(answers):
            candidate = CandidateFactory(pool_problem=pool_problem, index=position, answer=answer,
                                         is_correct=answer == "A")
            prm_score = 0.9 if position == 0 else 0.1
            CandidateScoreFactory(scoring_job=scorings["prm"], candidate=candidate, score=prm_score,
                                  score_min=prm_score)
            CandidateScoreFactory(scoring_job=scorings["orm"], candidate=candidate, score=1 - prm_score)
    return pool, scorings


def test_an_evaluation_splits_its_figures_by_domain_with_intervals_and_a_verdict() -> None:
    pool, scorings = _pool(["law", "law", "health", "health", "health"])
    run = evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=40)
    domains = run.results["domains"]
    assert sorted(domains) == ["health", "law"]
    assert (domains["law"]["problems"], domains["health"]["problems"]) == (2, 3)
    law = domains["law"]["methods"]
    assert (law["pass"]["2"]["mean"], law["prm"]["2"]["mean"], law["orm"]["2"]["mean"]) == (1.0, 1.0, 0.0)
    assert all(domains["health"]["methods"][m]["2"]["mean"] == 0.0 for m in ("prm", "orm", "majority", "pass"))
    # every law problem is alike: the bootstrap over them cannot move the difference
    assert domains["law"]["intervals"]["paired"]["prm-orm"]["2"] == {"diff": 1.0, "low": 1.0, "high": 1.0}

    rows = {row["domain"]: row for row in domain_rows(run)}
    assert list(rows) == ["health", "law"] and rows["law"]["n"] == 2 and rows["law"]["problems"] == 2
    cells = {cell["method"]: cell for cell in rows["law"]["cells"]}
    assert list(cells) == ["prm", "orm", "majority", "pass", "length", "position", "random", "prm-orm",
                           "prm-majority"]
    assert (cells["prm"]["value"], cells["orm"]["value"], cells["prm-orm"]["value"]) == (100.0, 0.0, 100.0)
    assert cells["prm-orm"]["low"] == cells["prm-orm"]["high"] == 100.0
    assert rows["law"]["verdict"][0] == "PRM ahead of ORM at N = 2 by 100.0 points (95 % CI 100.0–100.0)"
    assert rows["health"]["verdict"][0].startswith("PRM vs ORM: no difference this data can show at N ≤ 2")


def test_a_pool_of_one_domain_has_no_per_domain_figures() -> None:
    pool, scorings = _pool(["law", "law"])
    run = evaluate_pool(pool, prm_scoring=scorings["prm"], orm_scoring=scorings["orm"], trials=10)
    assert run.results["domains"] == {} and domain_rows(run) == []

"""The math demo's ORM is fed as the paper fed it: beside the headroom pool the comparison ranks, the demo loads
the 11 models' graded answers to other MMLU-Pro math questions, and the outcome export hands the ORM more than a
thousand wrong answers outside the pool's problems (a reduced load: the two MMLU-Pro pools, not the history)."""
from __future__ import annotations

import gzip
import json

import pytest

from demo.loader import (
    DEMO_DATA,
    MMLU_TRAINING_FILES,
    headroom_pool_name,
    import_headroom_pool,
    import_training_answers,
    training_pool_name,
)
from rewards.exports import ExportOptions
from rewards.formats import registry
from rewards.formats.outcome import pool_problem_ids
from rewards.jobs.models import CandidatePool

pytestmark = pytest.mark.django_db


def test_the_demo_orm_sees_over_a_thousand_wrong_answers_outside_the_headroom_pool(campaign_factory) -> None:
    campaign = campaign_factory("demo-orm", name="demo ORM answers")
    import_headroom_pool(campaign)
    imported = import_training_answers(campaign)
    assert imported == 144 * 11 and import_training_answers(campaign) == 0  # idempotent
    headroom = CandidatePool.objects.get(campaign=campaign, name=headroom_pool_name(campaign))
    training = CandidatePool.objects.get(campaign=campaign, name=training_pool_name(campaign))
    assert headroom.comparison_default and not training.comparison_default  # the compare still ranks the headroom
    excluded = set(pool_problem_ids(headroom))
    assert len(excluded) == 60 and not excluded & set(pool_problem_ids(training))

    rows = list(registry.get("outcome").rows(campaign, ExportOptions()))
    outside = [row for row in rows if row["problem_id"] not in excluded]
    wrong = [row for row in outside if not row["label"]]
    assert len(outside) == 144 * 11 and len(wrong) >= 1000 and len(outside) - len(wrong) >= 200
    assert {row["source"] for row in rows} == {"pool"}


def test_the_demo_training_answers_keep_their_origin_and_licence() -> None:
    readme = (DEMO_DATA / "README.md").read_text()
    with gzip.open(DEMO_DATA / "mmlu_pro" / MMLU_TRAINING_FILES[0], "rt") as lines:
        questions = [json.loads(line) for line in lines]
    with gzip.open(DEMO_DATA / "mmlu_pro" / "questions.jsonl.gz", "rt") as lines:
        headroom = {json.loads(line)["question_id"] for line in lines}
    assert len(questions) == 144 and {q["category"] for q in questions} == {"math"}
    assert not {q["question_id"] for q in questions} & headroom
    for name in MMLU_TRAINING_FILES:
        line = next(line for line in readme.splitlines() if f"`mmlu_pro/{name}`" in line)
        assert "TIGER-AI-Lab/MMLU-Pro @f418b11" in line and "Apache-2.0" in line

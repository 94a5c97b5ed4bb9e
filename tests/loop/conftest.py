"""A small labeled campaign for the loop: graded solutions with human −1/+1 step ratings, some of them in the
held-out (test) split, and a candidate pool of the same problems, built row by row with the real models."""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TEST_PROBLEMS = 3  # held-out problems under the default export split (seed 0, 10 % test)
TRAIN_PROBLEMS = 12


def _problems(tag: str) -> list[tuple[str, str, str]]:
    """(text, answer, split) for enough problems that the default split holds some out."""
    from annotate.models import text_digest
    from rewards.exports import ExportOptions, split_of

    options = ExportOptions()
    chosen: dict[str, list[tuple[str, str, str]]] = {"train": [], "test": []}
    i = 0
    while len(chosen["test"]) < TEST_PROBLEMS or len(chosen["train"]) < TRAIN_PROBLEMS:
        i += 1
        text = f"Loop problem {tag}-{i}: what is ${i} + {i + 1}$?"
        split = split_of(text_digest(text), options.seed, options.test_fraction)
        if len(chosen[split]) < (TEST_PROBLEMS if split == "test" else TRAIN_PROBLEMS):
            chosen[split].append((text, str(2 * i + 1), split))
    return chosen["train"] + chosen["test"]


def _steps(text: str, answer: str, wrong: bool) -> list[str]:
    a = text.split("$")[1]
    result = str(int(answer) + 7) if wrong else answer
    return [f"We need {a}.", f"Adding the two numbers gives {result}.", f"# Answer\n\n{result}"]


def build_campaign(slug: str, labeler: Any, *, graded: bool = True) -> Any:
    """Per problem a correct solution (every step +1, finished "solution") and a wrong one (its second step −1,
    finished "found_error"); ``graded=False`` leaves every grader verdict empty (no outcome rows)."""
    from annotate.models import FinishReason
    from tests.factories import (
        AssignmentFactory,
        CampaignFactory,
        CompletionFactory,
        MembershipFactory,
        ProblemFactory,
        RatingFactory,
        SolutionFactory,
        StepDecisionFactory,
        StepFactory,
    )

    campaign = CampaignFactory(slug=slug, name=f"Loop {slug}")
    MembershipFactory(campaign=campaign, user=labeler)
    for text, answer, _ in _problems(slug):
        problem = ProblemFactory(campaign=campaign, text=text, answer=answer)  # problems are the campaign's own
        for wrong in (False, True):
            solution = SolutionFactory(campaign=campaign, problem=problem, generator="loop-test",
                                       is_correct=(not wrong) if graded else None)
            ratings = [1, -1] if wrong else [1, 1, 1]
            assignment = AssignmentFactory(solution=solution, labeler=labeler,
                                           finish_reason=FinishReason.FOUND_ERROR if wrong else FinishReason.SOLUTION)
            for index, step_text in enumerate(_steps(text, answer, wrong)):
                step = StepFactory(solution=solution, index=index)
                completion = CompletionFactory(step=step, index=0, text=step_text)
                if index < len(ratings):
                    RatingFactory(assignment=assignment, completion=completion, rating=ratings[index])
                    StepDecisionFactory(assignment=assignment, step=step, chosen_completion=0)
    return campaign


def write_pool(path: Path, campaign: Any, per_problem: int = 4) -> Path:
    """One candidate per line for 6 of the campaign's problems: half right, half wrong."""
    from annotate.models import Problem

    problems = Problem.objects.filter(solutions__campaign=campaign).distinct().order_by("id")[:6]
    with path.open("w", encoding="utf-8") as handle:
        for problem in problems:
            for k in range(per_problem):
                steps = _steps(problem.text, problem.answer, wrong=bool(k % 2))
                handle.write(json.dumps({"problem": problem.text, "steps": steps}) + "\n")
    return path


@pytest.fixture
def labeler(make_user):
    return make_user(f"lab-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def loop_campaign(db, labeler):
    return build_campaign(f"loop-{uuid.uuid4().hex[:6]}", labeler)


@pytest.fixture
def campaign_admin(make_user, loop_campaign):
    from annotate.models import Role
    from tests.factories import MembershipFactory

    user = make_user(f"adm-{uuid.uuid4().hex[:6]}")
    MembershipFactory(campaign=loop_campaign, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def pool_file(tmp_path: Path, loop_campaign) -> Path:
    return write_pool(tmp_path / "loop-pool.jsonl", loop_campaign)


@pytest.fixture
def loop_pool(pool_file: Path, loop_campaign):
    from rewards.jobs.services.pools import import_pool

    pool, _ = import_pool(pool_file, f"{loop_campaign.slug}-pool", campaign=loop_campaign)
    return pool


@pytest.fixture
def storage(settings, tmp_path: Path) -> Path:
    """Jobs and exports in this test's own folders (for tests without a worker: it reads the real settings)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STEPLAB_EXPORT_TMP_DIR = tmp_path / "export-tmp"
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    return tmp_path


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}


@pytest.fixture
def hand_scored(loop_pool, loop_campaign):
    """Registered PRM and ORM rows with succeeded scorings of the pool (scores written directly, seeded, correct
    candidates higher): evaluation needs scores, not the models that made them."""
    import random

    from rewards.jobs.models import Candidate, JobStatus
    from tests.factories import CandidateScoreFactory, RewardModelFactory, ScoringJobFactory

    rng = random.Random(5)
    scorings = {}
    for kind in ("prm", "orm"):
        model = RewardModelFactory(kind=kind, campaign=loop_campaign, name=f"hand {kind.upper()}",
                                   location="/nowhere", base_model="default", trained_on=30,
                                   job__dataset_path="/x.jsonl", job__status=JobStatus.SUCCEEDED, job__progress=1.0)
        scoring = ScoringJobFactory(
            reward_model=model, pool=loop_pool, status=JobStatus.SUCCEEDED,
            step_metrics={"solutions": 6, "steps": 15, "step_auroc": 0.8125,
                          "processbench": {"error_acc": 0.5, "correct_acc": 1.0, "f1": 0.6667}}
            if kind == "prm" else {})
        for candidate in Candidate.objects.filter(pool_problem__pool=loop_pool):
            score = rng.random() * 0.5 + (0.4 if candidate.is_correct else 0.0)
            CandidateScoreFactory(scoring_job=scoring, candidate=candidate, score=score,
                                  score_min=score if kind == "prm" else None)
        scorings[kind] = scoring
    return scorings


@pytest.fixture
def campaign_builder(db) -> Callable[..., Any]:
    return build_campaign


@pytest.fixture
def pool_writer() -> Callable[..., Path]:
    return write_pool

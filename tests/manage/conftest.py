"""Campaign-admin fixtures: campaigns with solutions and finished labelings built row by row."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    FinishReason,
    Membership,
    Problem,
    Rating,
    Role,
    Solution,
    Step,
    StepDecision,
)

PASSWORD = "pw-Steplab-1"


def add_solution(campaign: Campaign, n_steps: int = 4, **fields: Any) -> Solution:
    problem = Problem.objects.create(text=f"Problem {Problem.objects.count() + 1}: what is $2+{n_steps}$?",
                                     answer=str(2 + n_steps))
    solution = Solution.objects.create(campaign=campaign, problem=problem, **fields)
    for index in range(n_steps):
        step = Step.objects.create(solution=solution, index=index)
        Completion.objects.create(step=step, index=0, text=f"Step {index + 1} of solution {solution.pk}.")
    return solution


def label(solution: Solution, user: Any, ratings: list[int | None], reason: str | None = None, *,
          finished_at: datetime | None = None, total_time_ms: int | None = None,
          step_time_ms: int | None = None, is_gold: bool = False) -> Assignment:
    """A finished labeling: ratings on the first completion of steps 0, 1, …; the reason follows the ratings."""
    if reason is None:
        reason = FinishReason.FOUND_ERROR if -1 in ratings else FinishReason.SOLUTION
    assignment = Assignment.objects.create(
        solution=solution, labeler=user, status=AssignmentStatus.SUBMITTED, finish_reason=reason,
        finished_at=finished_at or timezone.now(), total_time_ms=total_time_ms, is_gold=is_gold)
    completions = list(Completion.objects.filter(step__solution=solution, index=0).order_by("step__index"))
    for completion, rating in zip(completions, ratings, strict=False):
        Rating.objects.create(assignment=assignment, completion=completion, rating=rating, time_ms=step_time_ms)
        # as record_rating does in stepwise mode: a rated step is the one the labeler continued with
        StepDecision.objects.create(assignment=assignment, step_id=completion.step_id, chosen_completion=0)
    return assignment


@pytest.fixture
def solution_factory() -> Callable[..., Solution]:
    return add_solution


@pytest.fixture
def labeling_factory() -> Callable[..., Assignment]:
    return label


@pytest.fixture
def member(make_user):  # type: ignore[no-untyped-def]
    def make(campaign: Campaign, username: str, role: str = Role.LABELER, **fields: Any):  # type: ignore[no-untyped-def]
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(username=username).first() or make_user(username, password=PASSWORD)
        Membership.objects.create(campaign=campaign, user=user, role=role, **fields)
        return user

    return make


@pytest.fixture
def last_week() -> datetime:
    return timezone.now() - timedelta(days=7)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}

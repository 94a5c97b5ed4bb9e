"""Labeling fixtures: campaigns with real-looking solutions, labelers, and a headless Chromium."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from annotate.models import Campaign, Completion, Membership, Problem, Role, Solution, Step

PASSWORD = "pw-Steplab-1"


def add_solution(campaign: Campaign, steps: list[str] | list[list[str]], *, problem_text: str | None = None,
                 answer: str = "12", **fields: Any) -> Solution:
    """A solution whose steps are given as texts (stepwise) or lists of candidate texts (conversational)."""
    text = problem_text or f"Problem {Problem.objects.count() + 1}: what is $3 \\times 4$?"
    problem = Problem.objects.create(text=text, answer=answer)
    solution = Solution.objects.create(campaign=campaign, problem=problem, **fields)
    for index, step_texts in enumerate(steps):
        step = Step.objects.create(solution=solution, index=index)
        for position, completion_text in enumerate([step_texts] if isinstance(step_texts, str) else step_texts):
            Completion.objects.create(step=step, index=position, text=completion_text)
    return solution


@pytest.fixture
def solution_factory() -> Callable[..., Solution]:
    return add_solution


@pytest.fixture
def member(make_user):  # type: ignore[no-untyped-def]
    def make(campaign: Campaign, username: str, role: str = Role.LABELER, **fields: Any):  # type: ignore[no-untyped-def]
        user = make_user(username, password=PASSWORD)
        Membership.objects.create(campaign=campaign, user=user, role=role, **fields)
        return user

    return make


@pytest.fixture
def math500_rows(shared_data: Path) -> list[dict[str, Any]]:
    with (shared_data / "math" / "math500.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(20), handle, strict=False)]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}

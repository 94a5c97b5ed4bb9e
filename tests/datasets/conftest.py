"""Fixtures for dataset exports: real data (PRM800K rows, MATH-500) labeled through the real services."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from annotate.models import Campaign


@pytest.fixture
def storage_dirs(settings, tmp_path: Path) -> dict[str, Path]:
    """A private media folder and export temp folder per test (the default storage follows MEDIA_ROOT)."""
    media, tmp = tmp_path / "media", tmp_path / "export-tmp"
    settings.MEDIA_ROOT = media
    settings.STEPLAB_EXPORT_TMP_DIR = tmp
    return {"media": media, "tmp": tmp}


def _solution_rows(math500: Path, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """MATH-500 problems, and per problem its reference solution (correct) and a wrong-answer variant."""
    problems, solutions = [], []
    with open(math500) as handle:
        for line in handle:
            row = json.loads(line)
            if len(problems) == count:
                break
            if not row["answer"] or "\\boxed" not in row["solution"]:
                continue
            problems.append(row)
            steps = [part.strip() for part in row["solution"].split("\n\n") if part.strip()][:6]
            if len(steps) < 2:
                steps = [row["solution"].strip(), "The answer follows."]
            steps[-1] = steps[-1] + f" So the answer is $\\boxed{{{row['answer']}}}$."
            solutions.append({"problem_id": row["unique_id"], "steps": steps, "answer": row["answer"],
                              "generation": 1, "generator": "math500-reference"})
            wrong = steps[:-1] + ["Therefore the answer is $\\boxed{-987654}$."]
            solutions.append({"problem_id": row["unique_id"], "steps": wrong, "answer": "-987654",
                              "generation": 2, "generator": "math500-perturbed"})
    return problems, solutions


def label_everything(campaign: Campaign, labeler: Any) -> int:
    """Label every solution through ``annotate.services.labeling``: reference steps +1 (every third 0),
    the perturbed final step −1. Returns the number of finished assignments."""
    from annotate.services import labeling, leases

    finished = 0
    while True:
        outcome = leases.lease_next_solution(campaign, labeler)
        if outcome.assignment is None:
            return finished
        assignment = outcome.assignment
        steps = list(assignment.solution.steps.order_by("index").values_list("index", flat=True))
        wrong = assignment.solution.is_correct is False
        for index in steps:
            value = -1 if wrong and index == steps[-1] else (0 if index % 3 == 2 else 1)
            result = labeling.record_rating(assignment.pk, user=labeler, step_index=index, rating=value, time_ms=100)
            if result.found_error:
                break
        labeling.submit_assignment(assignment.pk, user=labeler)  # found_error after a −1, else solution
        finished += 1


@pytest.fixture
def math500_campaign(db, shared_data: Path, tmp_path: Path, campaign_factory, member):
    """A stepwise campaign of 12 MATH-500 problems × 2 graded solutions (imported), fully labeled by one labeler
    through the labeling services."""
    from annotate.permissions import SYSTEM
    from annotate.services.campaign_problems import bank_access
    from annotate.services.problems import import_problems, import_solutions

    problems, solutions = _solution_rows(shared_data / "math" / "math500.jsonl", 12)
    problem_file, solution_file = tmp_path / "problems.jsonl", tmp_path / "solutions.jsonl"
    problem_file.write_text("".join(json.dumps(p) + "\n" for p in problems))
    solution_file.write_text("".join(json.dumps(s) + "\n" for s in solutions))
    import_problems(problem_file)
    campaign = campaign_factory("lab", name="MATH-500 lab")
    with bank_access(SYSTEM):  # the solutions name the bank's problems, as a command's import would
        import_solutions(solution_file, campaign)
    labeler = member(campaign, "labeler1")
    assert label_everything(campaign, labeler) == len(solutions)
    return campaign


@pytest.fixture
def prm800k_campaign(db, shared_data: Path, campaign_factory):
    """The genuine PRM800K rows (phase 1 and 2) imported losslessly."""
    from annotate.services.prm800k_import import import_prm800k

    campaign = campaign_factory("prm", name="PRM800K sample", mode="conversational")
    import_prm800k(shared_data / "prm800k" / "genuine_rows.jsonl", campaign)
    return campaign

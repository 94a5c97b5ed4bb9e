"""PRM800K rows from the labels, read in chunks of a few queries each: what ``rewards.formats.prm800k`` and the
dataset versions write. The rows' shape is ``annotate.prm800k``'s (``export_row``); this module only reads."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from steplab.bulk import select_by_ids

from ..models import (
    Assignment,
    Completion,
    Problem,
    Rating,
    Step,
    StepDecision,
)
from .roundtrip import export_row


@dataclass
class ChunkData:
    """What one chunk of assignments needs, read in five queries: step ids per solution (in order), completions
    per step (id, index, text in index order), ratings and step decisions per (assignment, …)."""

    steps_by_solution: dict[int, list[int]]
    completions_by_step: dict[int, list[tuple[int, int, str]]]
    # (value, flagged, rationale, error category): the category is read by the TRL rows, never written to PRM800K
    ratings: dict[tuple[int, int], tuple[int | None, bool | None, str, str]]
    decisions: dict[tuple[int, int], tuple[int | None, Any]]


def iter_prm800k_chunks(assignments: Any, chunk_size: int = 1000) -> Iterator[tuple[list[Assignment], ChunkData]]:
    """Finished assignments in pk order, a chunk at a time with everything their rows need (constant memory).

    ``assignment.solution.problem`` is set from a cache: problems repeat across chunks."""
    last_pk = 0
    base = assignments.order_by("pk").select_related("solution")
    problems: dict[int, Problem] = {}
    while True:
        chunk = list(base.filter(pk__gt=last_pk)[:chunk_size])
        if not chunk:
            return
        last_pk = chunk[-1].pk
        problem_ids = {a.solution.problem_id for a in chunk} - problems.keys()
        problems.update(Problem.objects.in_bulk(problem_ids))
        for assignment in chunk:
            assignment.solution.problem = problems[assignment.solution.problem_id]
        yield chunk, _chunk_data(chunk)
        if len(problems) > 50_000:  # bound the cache on huge campaigns
            problems.clear()


def iter_prm800k_rows(assignments: Any, chunk_size: int = 1000) -> Iterator[dict[str, Any]]:
    """Stream finished assignments as PRM800K rows, in constant memory (a few queries per chunk)."""
    names = LabelerNames()
    for chunk, data in iter_prm800k_chunks(assignments, chunk_size):
        yield from prm800k_rows(chunk, data, names)


class LabelerNames:
    """Usernames of labelers, loaded once per chunk for those not seen yet (bounded)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def load(self, chunk: list[Assignment]) -> dict[int, str]:
        if len(self.names) > 50_000:
            self.names.clear()
        missing = {a.labeler_id for a in chunk if a.labeler_id} - self.names.keys()
        self.names.update(get_user_model().objects.filter(pk__in=missing).values_list("pk", "username"))
        return self.names


def prm800k_rows(chunk: list[Assignment], data: ChunkData, names: LabelerNames) -> Iterator[dict[str, Any]]:
    usernames = names.load(chunk)
    for assignment in chunk:
        yield export_row(assignment, data.steps_by_solution[assignment.solution_id], data.completions_by_step,
                         data.ratings, data.decisions, usernames)


def _chunk_data(chunk: list[Assignment]) -> ChunkData:
    solution_ids = {a.solution_id for a in chunk}
    steps_by_solution: dict[int, list[int]] = defaultdict(list)
    for step_id, solution_id in select_by_ids(Step, ["id", "solution_id"], "solution_id", solution_ids,
                                              order_by=("solution_id", "index")):
        steps_by_solution[solution_id].append(step_id)
    completions_by_step: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    # By step id, not through a join on the solution: the join made PostgreSQL hash the whole completion table
    # for every chunk (160 ms per 1,000 solutions measured on 1M completions); this is an index scan (5 ms).
    step_ids = [step_id for ids in steps_by_solution.values() for step_id in ids]
    for completion_id, step_id, index, text in select_by_ids(Completion, ["id", "step_id", "index", "text"],
                                                             "step_id", step_ids, order_by=("step_id", "index")):
        completions_by_step[step_id].append((completion_id, index, text))
    assignment_ids = [a.pk for a in chunk]
    ratings: dict[tuple[int, int], tuple[int | None, bool | None, str, str]] = {
        (assignment_id, completion_id): (value, flagged, rationale, category)
        for assignment_id, completion_id, value, flagged, rationale, category in
        select_by_ids(Rating, ["assignment_id", "completion_id", "rating", "flagged", "rationale", "error_category"],
                      "assignment_id", assignment_ids)}
    decisions: dict[tuple[int, int], tuple[int | None, Any]] = {
        (assignment_id, step_id): (chosen, human) for assignment_id, step_id, chosen, human in
        select_by_ids(StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"],
                      "assignment_id", assignment_ids)}
    return ChunkData(steps_by_solution, completions_by_step, ratings, decisions)

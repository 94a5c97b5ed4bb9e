"""PRM800K rows from the labels (``annotate.prm800k``'s format), read in chunks of a few queries each: what
``rewards.formats.prm800k`` and the dataset versions write."""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from steplab.bulk import select_by_ids

from .models import (
    Assignment,
    Completion,
    Problem,
    Rating,
    Step,
    StepDecision,
)
from .prm800k import HUMAN_COMPLETION_SCHEMA, QUESTION_KEYS, exported_labeler, question_from_fields


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return timezone.make_naive(value, UTC).isoformat() if timezone.is_aware(value) else value.isoformat()


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
    rated_completions = {key[1] for key in data.ratings}
    for assignment in chunk:
        yield _row(assignment, data.steps_by_solution[assignment.solution_id], data.completions_by_step,
                   data.ratings, data.decisions, rated_completions, usernames)


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


def _human(value: Any) -> Any:
    """A human completion object in the release's key order (jsonb stores keys in its own order)."""
    if not isinstance(value, dict):
        return value
    return {**{k: value[k] for k in HUMAN_COMPLETION_SCHEMA if k in value}, **value}


def _row(assignment: Assignment, step_ids: list[int], completions_by_step: dict[int, list[tuple[int, int, str]]],
         ratings: dict[tuple[int, int], tuple[int | None, bool | None, str, str]],
         decisions: dict[tuple[int, int], tuple[int | None, Any]], rated_completions: set[int],
         usernames: dict[int, str]) -> dict[str, Any]:
    """One PRM800K row from the relational data plus the solution's ``source_extra`` (what import recorded)."""
    solution = assignment.solution
    extra = solution.source_extra or {}
    null_completions = set(extra.get("null_completions", ()))
    float_ratings = extra.get("float_ratings")
    float_positions = {tuple(p) for p in float_ratings} if isinstance(float_ratings, list) else set()
    label_steps = []
    for position, step_id in enumerate(step_ids):
        completions = completions_by_step[step_id]
        decision = decisions.get((assignment.pk, step_id))
        touched = decision is not None or any((assignment.pk, cid) in ratings for cid, _, _ in completions)
        if not touched:
            continue
        rendered: list[dict[str, Any]] = []
        for completion_id, index, text in completions:
            value, flagged, rationale, _category = ratings.get((assignment.pk, completion_id), (None, None, "", ""))
            rating: float | None = value
            if value is not None and (float_ratings is True or (position, index) in float_positions):
                rating = float(value)
            completion: dict[str, Any] = {"text": text, "rating": rating, "flagged": flagged}
            if rationale:  # Steplab's own key, only where there is one: genuine PRM800K rows stay byte for byte
                completion["rationale"] = rationale
            rendered.append(completion)
        chosen, human = decision if decision is not None else (None, None)
        label_steps.append({"completions": None if position in null_completions else rendered,
                            "human_completion": _human(human), "chosen_completion": chosen})
    finish_reason = None if assignment.source_extra.get("finish_reason_null") else assignment.finish_reason
    label: dict[str, Any] = {"steps": label_steps, "total_time": assignment.total_time_ms,
                             "finish_reason": finish_reason}
    label.update(json.loads(extra["label_json"]) if "label_json" in extra else extra.get("label", {}))
    if "label_keys" in extra:
        label = {k: label[k] for k in extra["label_keys"] if k in label}
    derived = question_from_fields(solution.problem, pre_generated_steps=solution.pre_generated_steps,
                                   final_answer=solution.final_answer, verifier_score=solution.verifier_score)
    derived.update(json.loads(extra["question_json"]) if "question_json" in extra else extra.get("question", {}))
    keys = extra.get("question_keys") or list(QUESTION_KEYS)
    question = {k: derived.get(k) for k in keys}
    timestamp = assignment.source_timestamp or _iso(assignment.finished_at)
    if assignment.source_extra.get("timestamp_null"):
        timestamp = None
    timestamp = assignment.source_extra.get("timestamp", timestamp)
    labeler = assignment.source_extra.get("labeler")
    if labeler is None and assignment.labeler_id:
        labeler = exported_labeler(usernames[assignment.labeler_id])
    row: dict[str, Any] = {
        "labeler": labeler,
        "timestamp": timestamp,
        "generation": solution.generation,
        "is_quality_control_question": solution.is_quality_control,
        "is_initial_screening_question": solution.is_screening,
        "question": question,
        "label": label,
    }
    for key in extra.get("missing_row_keys", []):
        row.pop(key, None)
    row.update(json.loads(extra["row_json"]) if "row_json" in extra else extra.get("row", {}))
    if "row_keys" in extra:
        row = {k: row[k] for k in extra["row_keys"] if k in row}
    return row

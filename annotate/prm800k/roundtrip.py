"""Both directions of the round trip: what import records beyond the relational fields (``source_extra``) and what
export reads back, so that an exported row is JSON equal to the imported one."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from ..models import Assignment
from .schema import (
    HUMAN_COMPLETION_SCHEMA,
    LABEL_KEYS,
    QUESTION_KEYS,
    ROW_KEYS,
    ParsedRow,
    exported_labeler,
    imported_username,
    question_from_fields,
)

_NO_EXTRA: dict[str, Any] = {}  # shared by the assignments that need no extra (never mutated): dumped once


def solution_extra(row: ParsedRow, question: dict[str, Any], derived: dict[str, Any]) -> dict[str, Any]:
    """What export needs beyond the relational fields to give the row back as it came (``export_row`` reads it)."""
    extra: dict[str, Any] = {"question_keys": list(question.keys())}
    overrides = {k: v for k, v in question.items() if k not in derived or derived[k] != v
                 or type(derived[k]) is not type(v)}
    if overrides:  # as JSON text: jsonb would reorder the keys of nested objects
        extra["question_json"] = json.dumps(overrides, ensure_ascii=False)
    row_extra = {k: v for k, v in row.raw.items() if k not in ROW_KEYS}
    if row_extra:
        # As JSON text: PostgreSQL's jsonb would reorder the keys of nested objects.
        extra["row_json"] = json.dumps(row_extra, ensure_ascii=False)
    default_order = [k for k in ROW_KEYS if k in row.raw] + list(row_extra)
    if list(row.raw) != default_order:
        extra["row_keys"] = list(row.raw)
    missing_row_keys = [k for k in ROW_KEYS if k not in row.raw]
    if missing_row_keys:
        extra["missing_row_keys"] = missing_row_keys
    label = row.raw["label"]
    label_extra = {k: v for k, v in label.items() if k not in LABEL_KEYS}
    if label_extra:
        extra["label_json"] = json.dumps(label_extra, ensure_ascii=False)
    extra["label_keys"] = list(label.keys())
    null_completions = [i for i, step in enumerate(row.steps) if step.completions is None]
    if null_completions:
        extra["null_completions"] = null_completions
    floats = [[i, j] for i, raw_step in enumerate(label["steps"])
              for j, item in enumerate(raw_step["completions"] or ()) if isinstance(item["rating"], float)]
    if floats:
        rated = sum(item["rating"] is not None for raw_step in label["steps"] for item in raw_step["completions"] or ())
        extra["float_ratings"] = True if len(floats) == rated else floats
    return extra


def assignment_extra(row: ParsedRow) -> dict[str, Any]:
    """What export needs beyond the assignment's fields to give back the row's timestamp, finish reason and
    labeler as they came."""
    extra: dict[str, Any] = {}
    if row.timestamp is None:
        extra["timestamp_null"] = True
    elif not row.timestamp:
        extra["timestamp"] = ""  # an empty source_timestamp means "none recorded"
    if row.finish_reason is None:
        extra["finish_reason_null"] = True  # kept as give_up: the pass did not finish labeling
    if row.labeler is not None and imported_username(row.labeler) is None:
        extra["labeler"] = row.labeler
    return extra or _NO_EXTRA


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return timezone.make_naive(value, UTC).isoformat() if timezone.is_aware(value) else value.isoformat()


def human_completion(value: Any) -> Any:
    """A human completion object in the release's key order (jsonb stores keys in its own order)."""
    if not isinstance(value, dict):
        return value
    return {**{k: value[k] for k in HUMAN_COMPLETION_SCHEMA if k in value}, **value}


def export_row(assignment: Assignment, step_ids: list[int],
               completions_by_step: dict[int, list[tuple[int, int, str]]],
               ratings: dict[tuple[int, int], tuple[int | None, bool | None, str, str]],
               decisions: dict[tuple[int, int], tuple[int | None, Any]], usernames: dict[int, str]) -> dict[str, Any]:
    """One PRM800K row from the relational data plus the ``source_extra`` that ``solution_extra`` and
    ``assignment_extra`` recorded on import."""
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
                            "human_completion": human_completion(human), "chosen_completion": chosen})
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

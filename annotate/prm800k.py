"""The PRM800K JSONL format, exactly as OpenAI released it: validation, import and export.

One row is one labeler's pass over one solution::

    {labeler, timestamp, generation, is_quality_control_question, is_initial_screening_question,
     question: {problem, ground_truth_answer, ground_truth_solution?, pre_generated_steps?,
                pre_generated_answer?, pre_generated_verifier_score?},
     label: {steps: [{completions: [{text, rating, flagged}], human_completion, chosen_completion}],
             total_time, finish_reason}}

Import keeps every row as its own Solution + Assignment (a labeled trajectory); rows that label the
same pre-generated steps share ``content_sha256`` so agreement can group them. Keys Steplab does not
model, and values that differ from the relational ones, go to ``source_extra`` so that export gives
back JSON equal to the input, row for row.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from .models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    FinishReason,
    Problem,
    Rating,
    Solution,
    Step,
    StepDecision,
    text_digest,
)
from .services.importing import (
    ImportFailed,
    ImportReport,
    ProgressCallback,
    RowError,
    bulk_insert,
    insert_rows,
    refresh_planner_statistics,
    select_by_ids,
    valid_rows,
)
from .services.labeling import check_stop_at_first_error

ROW_KEYS = ("labeler", "timestamp", "generation", "is_quality_control_question", "is_initial_screening_question",
            "question", "label")
QUESTION_KEYS = ("problem", "ground_truth_answer", "ground_truth_solution", "pre_generated_steps",
                 "pre_generated_answer", "pre_generated_verifier_score")
LABEL_KEYS = ("steps", "total_time", "finish_reason")
FINISH_REASONS = tuple(FinishReason.values)


@dataclass
class ParsedCompletion:
    text: str
    rating: int | None
    flagged: bool | None


@dataclass
class ParsedStep:
    completions: list[ParsedCompletion]
    human_completion: Any
    chosen_completion: int | None


@dataclass
class ParsedRow:
    raw: dict[str, Any]
    labeler: str | None
    timestamp: str | None
    generation: int | None
    is_quality_control: bool
    is_screening: bool
    question: dict[str, Any]
    steps: list[ParsedStep]
    total_time: int | None
    finish_reason: str


def _expect(value: Any, kinds: tuple[type, ...], field: str, what: str, nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise RowError(field, f"must be {what}, got a boolean")
    if not isinstance(value, kinds):
        raise RowError(field, f"must be {what}, got {type(value).__name__}")
    return value


def _rating(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in (-1, 0, 1):
        raise RowError(field, f"must be -1, 0, 1 or null, got {json.dumps(value)}")
    return int(value)


def parse_row(obj: Any) -> ParsedRow:
    """Validate one PRM800K row; RowError names the first bad field."""
    if not isinstance(obj, dict):
        raise RowError("", f"a row must be a JSON object, got {type(obj).__name__}")
    for key in ("question", "label"):
        if key not in obj:
            raise RowError(key, "is missing")
    labeler = _expect(obj.get("labeler"), (str,), "labeler", "a string", nullable=True)
    timestamp = _expect(obj.get("timestamp"), (str,), "timestamp", "a string", nullable=True)
    generation = _expect(obj.get("generation"), (int,), "generation", "an integer", nullable=True)
    is_qc = _expect(obj.get("is_quality_control_question", False), (bool,), "is_quality_control_question", "a boolean")
    is_screening = _expect(
        obj.get("is_initial_screening_question", False), (bool,), "is_initial_screening_question", "a boolean"
    )
    question = _expect(obj["question"], (dict,), "question", "an object")
    problem = question.get("problem")
    if not isinstance(problem, str) or not problem.strip():
        raise RowError("question.problem", "is missing or empty" if not problem else "must be a string")
    for key in ("ground_truth_answer", "ground_truth_solution", "pre_generated_answer"):
        _expect(question.get(key), (str,), f"question.{key}", "a string", nullable=True)
    pre_steps = question.get("pre_generated_steps")
    if pre_steps is not None:
        _expect(pre_steps, (list,), "question.pre_generated_steps", "a list of strings")
        for position, item in enumerate(pre_steps):
            _expect(item, (str,), f"question.pre_generated_steps[{position}]", "a string")
    score = question.get("pre_generated_verifier_score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float, str))):
        raise RowError("question.pre_generated_verifier_score", "must be a number")
    label = _expect(obj["label"], (dict,), "label", "an object")
    raw_steps = _expect(label.get("steps"), (list,), "label.steps", "a list")
    if len(raw_steps) > settings.STEPLAB_MAX_STEPS_PER_SOLUTION:
        raise RowError("label.steps", f"has {len(raw_steps)} steps; the limit is {settings.STEPLAB_MAX_STEPS_PER_SOLUTION}")
    steps: list[ParsedStep] = []
    for index, raw_step in enumerate(raw_steps):
        where = f"label.steps[{index}]"
        _expect(raw_step, (dict,), where, "an object")
        raw_completions = _expect(raw_step.get("completions"), (list,), f"{where}.completions", "a list")
        completions = []
        for position, item in enumerate(raw_completions):
            here = f"{where}.completions[{position}]"
            _expect(item, (dict,), here, "an object")
            text = _expect(item.get("text"), (str,), f"{here}.text", "a string")
            if len(text) > settings.STEPLAB_MAX_STEP_CHARS:
                raise RowError(f"{here}.text", f"is longer than {settings.STEPLAB_MAX_STEP_CHARS} characters")
            completions.append(
                ParsedCompletion(
                    text=text,
                    rating=_rating(item.get("rating"), f"{here}.rating"),
                    flagged=_expect(item.get("flagged"), (bool,), f"{here}.flagged", "a boolean", nullable=True),
                )
            )
        chosen = _expect(raw_step.get("chosen_completion"), (int,), f"{where}.chosen_completion", "an integer",
                         nullable=True)
        if chosen is not None and not 0 <= chosen < len(completions):
            raise RowError(f"{where}.chosen_completion",
                           f"is {chosen}, out of range for {len(completions)} completion(s)")
        human = raw_step.get("human_completion")
        if human is not None and not isinstance(human, str):
            _expect(human, (dict,), f"{where}.human_completion", "null, a string or an object")
            _expect(human.get("text"), (str,), f"{where}.human_completion.text", "a string")
        steps.append(ParsedStep(completions, human, chosen))
    total_time = _expect(label.get("total_time"), (int,), "label.total_time", "an integer (ms)", nullable=True)
    if total_time is not None and total_time < 0:
        raise RowError("label.total_time", "must not be negative")
    finish_reason = label.get("finish_reason")
    if finish_reason not in FINISH_REASONS:
        raise RowError("label.finish_reason", f"must be one of {', '.join(FINISH_REASONS)}, got {json.dumps(finish_reason)}")
    _check_stepwise_pass(steps)
    return ParsedRow(
        raw=obj, labeler=labeler, timestamp=timestamp, generation=generation, is_quality_control=is_qc,
        is_screening=is_screening, question=question, steps=steps, total_time=total_time,
        finish_reason=finish_reason,
    )


def _check_stepwise_pass(steps: list[ParsedStep]) -> None:
    """A stepwise pass (one completion per step, none written by the labeler) keeps stop-at-first-error, as
    the workspace does: no gap before a rated step, nothing rated after the first −1. Every genuine PRM800K
    row of that shape does; conversational rows rate alternatives after a −1 and are not this rule's."""
    if any(len(step.completions) > 1 or step.human_completion is not None for step in steps):
        return
    broken = check_stop_at_first_error([step.completions[0].rating if step.completions else None
                                        for step in steps])
    if broken is not None:
        index, why = broken
        raise RowError(f"label.steps[{index}].completions[0].rating", why)


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _parse_timestamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, dt_timezone.utc)


def content_digest(problem: str, step_texts: list[str]) -> str:
    return hashlib.sha256(json.dumps([problem, step_texts], ensure_ascii=False).encode()).hexdigest()


def question_from_fields(problem: Problem, solution: Solution) -> dict[str, Any]:
    """The PRM800K `question` object that Steplab's relational fields give (before overrides)."""
    return {
        "problem": problem.text,
        "ground_truth_answer": problem.answer,
        "ground_truth_solution": problem.solution,
        "pre_generated_steps": solution.pre_generated_steps,
        "pre_generated_answer": solution.final_answer,
        "pre_generated_verifier_score": solution.verifier_score,
    }


class _Lookups:
    """Caches of problems and labeler accounts, so a batch costs a constant number of queries."""

    def __init__(self) -> None:
        self.problems: dict[str, Problem] = {}
        self.users: dict[str, int] = {}

    def problems_for(self, rows: list[ParsedRow], created: dict[str, int]) -> None:
        wanted: dict[str, ParsedRow] = {}
        for row in rows:
            digest = text_digest(row.question["problem"])
            if digest not in self.problems:
                wanted.setdefault(digest, row)
        if not wanted:
            return
        for problem in Problem.objects.filter(text_sha256__in=list(wanted)):
            self.problems[problem.text_sha256] = problem
        missing = [digest for digest in wanted if digest not in self.problems]
        new = [
            Problem(
                text=wanted[d].question["problem"], text_sha256=d,
                answer=wanted[d].question.get("ground_truth_answer"),
                solution=wanted[d].question.get("ground_truth_solution"),
            )
            for d in missing
        ]
        for problem in bulk_insert(new):
            self.problems[problem.text_sha256] = problem
        created["problems"] = created.get("problems", 0) + len(new)

    def users_for(self, rows: list[ParsedRow], created: dict[str, int]) -> None:
        names = {row.labeler for row in rows if row.labeler and row.labeler not in self.users}
        if not names:
            return
        User = get_user_model()
        for pk, username in User.objects.filter(username__in=names).values_list("pk", "username"):
            self.users[username] = pk
        missing = sorted(names - set(self.users))
        # Imported labelers become inactive accounts with unusable passwords: they exist for provenance.
        new_users = [User(username=name, is_active=False, password="!imported") for name in missing]
        for user in User.objects.bulk_create(new_users, batch_size=500):
            self.users[user.username] = user.pk
        if not all(user.pk for user in new_users):  # databases that return no pks from bulk_create
            for pk, username in User.objects.filter(username__in=missing).values_list("pk", "username"):
                self.users[username] = pk
        created["users"] = created.get("users", 0) + len(missing)


def _import_batch(campaign: Campaign, rows: list[ParsedRow], lookups: _Lookups, created: dict[str, int]) -> None:
    lookups.problems_for(rows, created)
    lookups.users_for(rows, created)
    solutions: list[Solution] = []
    for row in rows:
        problem = lookups.problems[text_digest(row.question["problem"])]
        question = row.question
        solution = Solution(
            campaign=campaign, problem=problem, generation=row.generation,
            is_quality_control=row.is_quality_control, is_screening=row.is_screening,
            final_answer=question.get("pre_generated_answer"),
            verifier_score=_float_or_none(question.get("pre_generated_verifier_score")),
            pre_generated_steps=question.get("pre_generated_steps"), generator="prm800k",
            label_count=1, provenance={"source": "prm800k"},
        )
        solution.content_sha256 = content_digest(
            problem.text, question.get("pre_generated_steps") or [s.completions[0].text if s.completions else ""
                                                                    for s in row.steps]
        )
        derived = question_from_fields(problem, solution)
        extra: dict[str, Any] = {"question_keys": list(question.keys())}
        overrides = {k: v for k, v in question.items() if k not in derived or derived[k] != v
                     or type(derived[k]) is not type(v)}
        if overrides:
            extra["question"] = overrides
        row_extra = {k: v for k, v in row.raw.items() if k not in ROW_KEYS}
        if row_extra:
            extra["row"] = row_extra
        missing_row_keys = [k for k in ROW_KEYS if k not in row.raw]
        if missing_row_keys:
            extra["missing_row_keys"] = missing_row_keys
        label = row.raw["label"]
        label_extra = {k: v for k, v in label.items() if k not in LABEL_KEYS}
        if label_extra:
            extra["label"] = label_extra
        extra["label_keys"] = list(label.keys())
        solution.source_extra = extra
        solutions.append(solution)
    bulk_insert(solutions)

    assignments = []
    for row, solution in zip(rows, solutions, strict=True):
        finished = _parse_timestamp(row.timestamp)
        assignments.append(Assignment(
            solution=solution, labeler_id=lookups.users.get(row.labeler) if row.labeler else None,
            status=AssignmentStatus.SUBMITTED, finished_at=finished, finish_reason=row.finish_reason,
            total_time_ms=row.total_time, source_timestamp=row.timestamp or "",
            source_extra={} if row.timestamp is not None else {"timestamp_null": True},
        ))
    bulk_insert(assignments)

    step_ids = insert_rows(Step, ["solution_id", "index"],
                           [(solution.pk, i) for row, solution in zip(rows, solutions, strict=True)
                            for i in range(len(row.steps))])
    completion_rows: list[tuple[Any, ...]] = []
    rating_rows: list[tuple[Any, ...]] = []  # (assignment, rating, flagged); the completion id is added below
    decision_rows: list[tuple[Any, ...]] = []
    step_iter = iter(step_ids)
    for row, assignment in zip(rows, assignments, strict=True):
        for parsed_step in row.steps:
            step_id = next(step_iter)
            for position, parsed in enumerate(parsed_step.completions):
                completion_rows.append((step_id, position, parsed.text))
                rating_rows.append((assignment.pk, parsed.rating, parsed.flagged))
            decision_rows.append((assignment.pk, step_id, parsed_step.chosen_completion, parsed_step.human_completion))
    completion_ids = insert_rows(Completion, ["step_id", "index", "text"], completion_rows)
    insert_rows(Rating, ["assignment_id", "completion_id", "rating", "flagged"],
                [(a, c, r, f) for (a, r, f), c in zip(rating_rows, completion_ids, strict=True)])
    insert_rows(StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"], decision_rows)
    steps, ratings = step_ids, rating_rows
    for name, count in (("solutions", len(solutions)), ("steps", len(steps)), ("ratings", len(ratings))):
        created[name] = created.get(name, 0) + count


def import_prm800k(path: Path | str, campaign: Campaign, *, skip_invalid: bool = False,
                   progress: ProgressCallback | None = None) -> ImportReport:
    """Import a PRM800K JSONL file into ``campaign``; all or nothing unless ``skip_invalid``.

    One pass, parsing each line once (parsing is a third of the import's time on 1M ratings): rows are written
    while the file is read, inside one transaction. The first bad line stops the writing — the rest is only
    parsed, so that every bad line is reported — and the transaction is rolled back: nothing is imported.
    """
    path = Path(path)
    report = ImportReport(file=str(path))
    lookups = _Lookups()
    try:
        with transaction.atomic():
            for batch in valid_rows(path, parse_row, settings.STEPLAB_IMPORT_BATCH, progress, report=report):
                if report.rejected_count and not skip_invalid:
                    continue
                _import_batch(campaign, [row for _, row in batch], lookups, report.created)
                report.imported += len(batch)
            if report.rejected_count and not skip_invalid:
                raise ImportFailed(report)
    except ImportFailed:
        report.imported, report.created = 0, {}
        raise
    refresh_planner_statistics(Problem, Solution, Assignment, Step, Completion, Rating, StepDecision)
    return report


# --- export ---------------------------------------------------------------------------------------

def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return timezone.make_naive(value, dt_timezone.utc).isoformat() if timezone.is_aware(value) else value.isoformat()


@dataclass
class ChunkData:
    """What one chunk of assignments needs, read in five queries: step ids per solution (in order), completions
    per step (id, index, text in index order), ratings and step decisions per (assignment, …)."""

    steps_by_solution: dict[int, list[int]]
    completions_by_step: dict[int, list[tuple[int, int, str]]]
    ratings: dict[tuple[int, int], tuple[int | None, bool | None]]
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
    ratings: dict[tuple[int, int], tuple[int | None, bool | None]] = {
        (assignment_id, completion_id): (value, flagged) for assignment_id, completion_id, value, flagged in
        select_by_ids(Rating, ["assignment_id", "completion_id", "rating", "flagged"], "assignment_id",
                      assignment_ids)}
    decisions: dict[tuple[int, int], tuple[int | None, Any]] = {
        (assignment_id, step_id): (chosen, human) for assignment_id, step_id, chosen, human in
        select_by_ids(StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"],
                      "assignment_id", assignment_ids)}
    return ChunkData(steps_by_solution, completions_by_step, ratings, decisions)


def _row(assignment: Assignment, step_ids: list[int], completions_by_step: dict[int, list[tuple[int, int, str]]],
         ratings: dict[tuple[int, int], tuple[int | None, bool | None]],
         decisions: dict[tuple[int, int], tuple[int | None, Any]], rated_completions: set[int],
         usernames: dict[int, str]) -> dict[str, Any]:
    solution = assignment.solution
    extra = solution.source_extra or {}
    label_steps = []
    for step_id in step_ids:
        completions = completions_by_step[step_id]
        decision = decisions.get((assignment.pk, step_id))
        touched = decision is not None or any((assignment.pk, cid) in ratings for cid, _, _ in completions)
        if not touched:
            continue
        rendered = []
        for completion_id, _, text in completions:
            value, flagged = ratings.get((assignment.pk, completion_id), (None, None))
            rendered.append({"text": text, "rating": value, "flagged": flagged})
        chosen, human = decision if decision is not None else (None, None)
        label_steps.append({"completions": rendered, "human_completion": human, "chosen_completion": chosen})
    label: dict[str, Any] = {"steps": label_steps, "total_time": assignment.total_time_ms,
                             "finish_reason": assignment.finish_reason}
    label.update(extra.get("label", {}))
    if "label_keys" in extra:
        label = {k: label[k] for k in extra["label_keys"] if k in label}
    derived = question_from_fields(solution.problem, solution)
    derived.update(extra.get("question", {}))
    keys = extra.get("question_keys") or list(QUESTION_KEYS)
    question = {k: derived.get(k) for k in keys}
    timestamp = assignment.source_timestamp or _iso(assignment.finished_at)
    if assignment.source_extra.get("timestamp_null"):
        timestamp = None
    row: dict[str, Any] = {
        "labeler": usernames.get(assignment.labeler_id) if assignment.labeler_id else None,
        "timestamp": timestamp,
        "generation": solution.generation,
        "is_quality_control_question": solution.is_quality_control,
        "is_initial_screening_question": solution.is_screening,
        "question": question,
        "label": label,
    }
    for key in extra.get("missing_row_keys", []):
        row.pop(key, None)
    row.update(extra.get("row", {}))
    return row

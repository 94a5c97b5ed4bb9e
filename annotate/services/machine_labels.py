"""Machine step labels beside the human ones: recording a source, importing label files, disagreement.

A *source* is a kind (a registered ``annotate.labelsources`` kind: ``mc``, ``prm``, ``import``, ``llm``) and a
name; its label of a step is P(step correct) in [0, 1]. Recording a source again replaces that source's labels of
the same solutions and never touches a human rating. Each record keeps ``Solution.machine_disagreement`` current,
which the "disagreement first" lease order sorts on.

The hard label a source gives a step is its kind's (``annotate.labelsources.says_correct``); a source's first
error is its first step that is not correct.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count

from steplab import bulk
from steplab.jsonlimits import MAX_ID

from .. import labelsources
from ..labelsources.imported import IMPORT
from ..models import Campaign, Completion, MachineLabel, Solution, Step, problem_key
from . import importing

HUMAN = "human"
MAX_SOURCE_CHARS = 200
MAX_ROLLOUTS = 2**31 - 1  # what the column (a PostgreSQL integer) holds


@dataclass(frozen=True)
class StepValue:
    index: int
    value: float
    rollouts: int | None = None
    #: why the source labels the step so (a judge's one-line reason), kept in the label's provenance
    reason: str | None = None


def source_kind(source_key: str) -> str:
    return labelsources.kind_of(source_key)


def first_error(kind: str, values: Mapping[int, float]) -> int:
    """The first step the source does not call correct; -1 when it calls every labeled step correct."""
    return next((index for index in sorted(values) if not labelsources.says_correct(kind, values[index])), -1)


def disagreement(by_source: Mapping[str, Mapping[int, float]]) -> float:
    """0–2: 1 when the sources' first errors differ, plus the uncertainty of the least certain estimate (its
    kind's: a Monte-Carlo estimate's is 1 at 0.5, 0 at 0 or 1). A solution with one confident source scores 0."""
    firsts = {first_error(source_kind(key), values) for key, values in by_source.items() if values}
    uncertain = max((labelsources.uncertainty(source_kind(key), value) for key, values in by_source.items()
                     for value in values.values()), default=0.0)
    return (1.0 if len(firsts) > 1 else 0.0) + uncertain


def labels_by_solution(solution_ids: Iterable[int]) -> dict[int, dict[str, dict[int, float]]]:
    """solution id -> source key -> step index -> value."""
    result: dict[int, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    rows = MachineLabel.objects.filter(solution_id__in=list(solution_ids)).values_list(
        "solution_id", "kind", "source", "step__index", "value")
    for solution_id, kind, source, index, value in rows.iterator(chunk_size=5000):
        result[solution_id][f"{kind}:{source}"][index] = value
    return result


def update_disagreement(solution_ids: Iterable[int]) -> None:
    ids = list(solution_ids)
    by_solution = labels_by_solution(ids)
    changed = [Solution(pk=pk, machine_disagreement=disagreement(by_solution[pk]) if by_solution.get(pk) else None)
               for pk in ids]
    Solution.objects.bulk_update(changed, ["machine_disagreement"], batch_size=1000)


@transaction.atomic
def record_machine_labels(*, labels: Mapping[int, Sequence[StepValue]], kind: str, source: str,
                          provenance: Mapping[str, Any] | None = None) -> int:
    """Store one source's labels of some solutions (solution id -> step values), replacing what that source said
    of those solutions before. Steps a solution does not have are refused (ValueError naming them)."""
    labelsources.get(kind)  # refuses a kind no module registered, naming the known ones
    if not source or len(source) > MAX_SOURCE_CHARS:
        raise ValueError(f"a source needs a name of 1–{MAX_SOURCE_CHARS} characters")
    steps = {(solution_id, index): pk for pk, solution_id, index in
             Step.objects.filter(solution_id__in=list(labels)).values_list("pk", "solution_id", "index")}
    objects = []
    for solution_id, values in labels.items():
        for item in values:
            step_id = steps.get((solution_id, item.index))
            if step_id is None:
                raise ValueError(f"solution {solution_id} has no step {item.index}")
            if not 0 <= item.value <= 1:
                raise ValueError(f"solution {solution_id} step {item.index}: value {item.value} is not in [0, 1]")
            own = {**(provenance or {}), "reason": item.reason} if item.reason else dict(provenance or {})
            objects.append(MachineLabel(step_id=step_id, solution_id=solution_id, kind=kind, source=source,
                                        value=item.value, rollouts=item.rollouts, provenance=own))
    MachineLabel.objects.filter(solution_id__in=list(labels), kind=kind, source=source).delete()
    MachineLabel.objects.bulk_create(objects, batch_size=2000)
    update_disagreement(labels)
    return len(objects)


def values_from_first_error(step_count: int, index: int | None) -> list[StepValue]:
    """An OmegaPRM-style first-error index as labels: steps before it correct (1), it wrong (0), later ones
    unlabeled; no error (None or -1): every step correct."""
    if index is None or index < 0:
        return [StepValue(i, 1.0, 0) for i in range(step_count)]
    return [StepValue(i, 1.0, 0) for i in range(index)] + [StepValue(index, 0.0, 0)]


# --- Import from files ---------------------------------------------------------------------------------------

_PRM800K_VALUES = {1: 1.0, 0: 0.5, -1: 0.0}


@dataclass(frozen=True)
class LabelRow:
    """A parsed row: which solution (``solution_id``, or ``problem`` + ``steps``) and its labels."""

    solution_id: int | None
    problem: str | None
    steps: tuple[str, ...] | None
    values: tuple[StepValue, ...] | None  # None: a first-error row, resolved once the step count is known
    first_error: int | None = None
    rollouts: int | None = None


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise importing.RowError(field, f"must be a number in [0, 1], got {value!r}")
    return float(value)


def _steps(value: Any, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise importing.RowError(field, "must be a non-empty list of strings")
    return tuple(value)


def _soft_labels(row: dict[str, Any], rollouts: int | None) -> tuple[StepValue, ...]:
    labels = row["labels"]
    if not isinstance(labels, list) or not labels:
        raise importing.RowError("labels", "must be a non-empty list of numbers in [0, 1] (or '+' / '-')")
    values = []
    for index, label in enumerate(labels):
        if label in ("+", "-"):  # Math-Shepherd's hard labels
            values.append(StepValue(index, 1.0 if label == "+" else 0.0, rollouts))
        else:
            values.append(StepValue(index, _number(label, f"labels[{index}]"), rollouts))
    return tuple(values)


def _prm800k_row(row: dict[str, Any]) -> LabelRow:
    question, label = row.get("question"), row.get("label")
    if not isinstance(question, dict) or not isinstance(question.get("problem"), str):
        raise importing.RowError("question.problem", "must be a string")
    if not isinstance(label, dict) or not isinstance(label.get("steps"), list):
        raise importing.RowError("label.steps", "must be a list")
    texts, values = [], []
    for index, step in enumerate(label["steps"]):
        where = f"label.steps[{index}]"
        completions = step.get("completions") if isinstance(step, dict) else None
        if not isinstance(completions, list) or not completions:
            break  # a pass that ended (give up, bad problem) before this step
        chosen = step.get("chosen_completion")
        picked = completions[chosen if isinstance(chosen, int) and 0 <= chosen < len(completions) else 0]
        if not isinstance(picked, dict) or not isinstance(picked.get("text"), str):
            raise importing.RowError(f"{where}.completions", "must hold objects with a 'text'")
        rating = picked.get("rating")
        if rating is None:
            break
        if rating not in _PRM800K_VALUES:
            raise importing.RowError(f"{where}.rating", f"must be -1, 0, 1 or null, got {rating!r}")
        texts.append(picked["text"])
        values.append(StepValue(index, _PRM800K_VALUES[rating]))
        if rating == -1:
            break
    if not values:
        raise importing.RowError("label.steps", "no rated step")
    pre = question.get("pre_generated_steps")
    steps = _steps(pre, "question.pre_generated_steps") if pre is not None else tuple(texts)
    return LabelRow(None, question["problem"], steps, tuple(values))


def parse_label_row(row: Any) -> LabelRow:
    """One line of a machine-label file, in one of three shapes (the row's keys say which):

    - ``labels``: Math-Shepherd-style soft labels, one per step (numbers in [0, 1], or ``"+"``/``"-"``);
    - ``first_error``: OmegaPRM-style index of the first wrong step (``-1`` or null: none);
    - ``question`` + ``label``: a PRM800K row; its chosen path's ratings become 1 / 0.5 / 0.

    The solution is ``solution_id`` (an id in the campaign) or ``problem`` + ``steps`` (its exact step texts).
    ``rollouts`` (optional) is the Monte-Carlo sample size behind soft labels.
    """
    if not isinstance(row, dict):
        raise importing.RowError("", "a row must be a JSON object")
    if "label" in row and "question" in row:
        return _prm800k_row(row)
    solution_id = row.get("solution_id")
    if solution_id is not None and (isinstance(solution_id, bool) or not isinstance(solution_id, int)
                                    or not 1 <= solution_id <= MAX_ID):
        raise importing.RowError("solution_id", f"must be a solution id (a positive integer), got {solution_id!r}")
    problem, steps = row.get("problem"), row.get("steps")
    if solution_id is None:
        if not isinstance(problem, str) or not problem.strip():
            raise importing.RowError("solution_id", "missing: give solution_id, or problem and steps")
        steps = _steps(steps, "steps")
    rollouts = row.get("rollouts")
    if rollouts is not None and (isinstance(rollouts, bool) or not isinstance(rollouts, int)
                                 or not 1 <= rollouts <= MAX_ROLLOUTS):
        raise importing.RowError("rollouts", f"must be an integer between 1 and {MAX_ROLLOUTS}, got {rollouts!r}")
    if "labels" in row:
        values = _soft_labels(row, rollouts)
        if steps is not None and len(values) > len(steps):
            raise importing.RowError("labels", f"{len(values)} labels for {len(steps)} steps")
        return LabelRow(solution_id, problem, steps, values, rollouts=rollouts)
    if "first_error" in row:
        index = row["first_error"]
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < -1):
            raise importing.RowError("first_error", f"must be a step index, -1 or null, got {index!r}")
        return LabelRow(solution_id, problem, steps, None, first_error=index)
    raise importing.RowError("labels", "missing: give labels (soft labels), first_error, or a PRM800K label")


def _match(campaign: Campaign, rows: list[tuple[int, LabelRow]]
           ) -> tuple[dict[int, tuple[list[int], int]], list[tuple[int, importing.RowError]]]:
    """Line -> (the campaign's solutions the row names, their step count), and the rows that name none. A row
    without ``solution_id`` names the solutions of its problem (joined on the normalised text, as imports join
    problems) whose own steps are exactly its ``steps``."""
    ids = {row.solution_id for _, row in rows if row.solution_id is not None}
    by_id = dict(Solution.objects.filter(campaign=campaign, pk__in=ids).annotate(n=Count("steps"))
                 .values_list("pk", "n"))
    keys = {problem_key(row.problem) for _, row in rows if row.solution_id is None and row.problem}
    by_content: dict[tuple[str, tuple[str, ...]], list[int]] = defaultdict(list)
    if keys:
        texts: dict[int, list[str]] = defaultdict(list)
        problem_of: dict[int, str] = {}
        own_steps = (Completion.objects.filter(step__solution__campaign=campaign, index=0,
                                               step__solution__problem__key_sha256__in=keys)
                     .order_by("step__solution_id", "step__index")
                     .values_list("step__solution_id", "step__solution__problem__key_sha256", "text"))
        for solution_id, key, text in own_steps.iterator(chunk_size=5000):
            texts[solution_id].append(text)
            problem_of[solution_id] = key
        for solution_id, steps in texts.items():
            by_content[(problem_of[solution_id], tuple(steps))].append(solution_id)
    matched: dict[int, tuple[list[int], int]] = {}
    errors: list[tuple[int, importing.RowError]] = []
    for number, row in rows:
        if row.solution_id is not None:
            if row.solution_id in by_id:
                matched[number] = ([row.solution_id], by_id[row.solution_id])
            else:
                errors.append((number, importing.RowError(
                    "solution_id", f"no solution {row.solution_id} in campaign {campaign.slug}")))
            continue
        found = by_content.get((problem_key(row.problem or ""), row.steps or ()), [])
        if not found:
            errors.append((number, importing.RowError(
                "steps", f"no solution of campaign {campaign.slug} has this problem with these steps")))
            continue
        matched[number] = (sorted(found), len(row.steps or ()))
    return matched, errors


def _row_values(row: LabelRow, step_count: int) -> list[StepValue]:
    if row.values is None:
        if row.first_error is not None and row.first_error >= step_count:
            raise importing.RowError("first_error", f"step {row.first_error} does not exist ({step_count} steps)")
        return values_from_first_error(step_count, row.first_error)
    if len(row.values) > step_count:
        raise importing.RowError("labels", f"{len(row.values)} labels for a solution of {step_count} steps")
    return list(row.values)


def import_machine_labels(path: Path | str, campaign: Campaign, *, source: str, skip_invalid: bool = False,
                          progress: bulk.ProgressCallback | None = None) -> importing.ImportReport:
    """Import a file of machine labels as the ``import`` source ``source``; every row is checked (shape, and
    that it names a solution of the campaign with enough steps) before anything is written."""
    path = Path(path)
    source = (source or "").strip()
    if not source or len(source) > MAX_SOURCE_CHARS:
        raise ValueError(f"--source: give the labels' source a name of 1–{MAX_SOURCE_CHARS} characters")
    report = importing.ImportReport(file=str(path))
    labels: dict[int, list[StepValue]] = {}
    rollouts_seen: set[int] = set()
    for batch in importing.valid_rows(path, parse_label_row, settings.STEPLAB_IMPORT_BATCH, progress,
                                      "check", report=report):
        matched, errors = _match(campaign, batch)
        for number, error in errors:
            report.reject(number, error)
        for number, row in batch:
            if number not in matched:
                continue
            solution_ids, step_count = matched[number]
            try:
                values = _row_values(row, step_count)
            except importing.RowError as error:
                report.reject(number, error)
                continue
            for solution_id in solution_ids:
                labels[solution_id] = values
            if row.rollouts:
                rollouts_seen.add(row.rollouts)
            report.imported += 1
    if report.rejected_count and not skip_invalid:
        report.rejected.sort(key=lambda item: item.line)
        raise importing.ImportFailed(report)
    written = record_machine_labels(labels=labels, kind=IMPORT.name, source=source,
                                    provenance={"file": path.name, "rollouts": sorted(rollouts_seen)})
    report.created = {"solutions": len(labels), "step_labels": written}
    return report

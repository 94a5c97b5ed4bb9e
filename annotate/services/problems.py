"""Importers for problems and for generator samples (solutions to label or to score).

Besides the MATH layout (``problem``, ``answer``, ``subject``, ``level``, ``unique_id``) and the sampler's
(``problem_id`` or ``problem``, ``solution`` or ``steps``), both accept generic rows of any domain as they come:
``question`` (the text), ``question_id`` or ``id`` (the unique id, a string or an integer), optional ``options``
(multiple choice: the option texts, shown as A, B, …), ``answer``, ``category`` (the domain); and for solutions
``response`` (the text) or ``steps``, ``model`` (the generator) — MMLU-Pro's ``questions.jsonl`` and
``responses.jsonl`` rows import unchanged (a response's ``pred`` is kept as provenance, never used to grade).
Responses are split by the campaign's step rule and graded by its grader (``stepcore.graders``).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q

from stepcore.graders import Grader, get_grader
from stepcore.steps import check_step_rule, split_solution
from steplab import bulk

from ..models import Campaign, Completion, Problem, Solution, Step, problem_key
from ..prm800k import content_digest
from . import importing
from .campaign_problems import UNKNOWN_PROBLEM, owned_problems, resolve_problems

# "Level ?" is in the MATH train split (two problems whose level is unknown): accepted as no level.
LEVEL = re.compile(r"^(?:Level\s*)?(\d+|\?)$", re.IGNORECASE)


def campaign_grader(campaign: Campaign | None) -> Grader:
    """The grader of ``campaign`` (the staff bank's problems are graded as math, as they always were)."""
    return get_grader() if campaign is None else get_grader(campaign.grader, campaign.grader_config)


def _first_key(obj: dict[str, Any], *keys: str) -> str:
    """The first of ``keys`` the row has (the first one when it has none: errors name the primary spelling)."""
    return next((key for key in keys if obj.get(key) is not None), keys[0])


def _identifier(obj: dict[str, Any], *keys: str) -> str | None:
    """A unique id given as a string or an integer (MMLU-Pro's ``question_id`` is a number)."""
    key = _first_key(obj, *keys)
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(obj, key)


MAX_OPTIONS = 26


def _options(obj: dict[str, Any]) -> list[str] | None:
    value = obj.get("options")
    if value is None:
        return None
    # one option is allowed: MMLU-Pro has five such questions, and a benchmark's rows import as they are
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_OPTIONS:
        raise importing.RowError("options", f"must be a list of 1 to {MAX_OPTIONS} option texts")
    for position, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise importing.RowError(f"options[{position}]", "must be a non-empty string")
        if len(item) > settings.STEPLAB_MAX_STEP_CHARS:
            raise importing.RowError(f"options[{position}]",
                                     f"is longer than {settings.STEPLAB_MAX_STEP_CHARS} characters")
    return value


def _string(obj: dict[str, Any], *keys: str, required: bool = False, blank: bool = True) -> str | None:
    """The first of ``keys`` the row has (its other spellings: ``problem`` or ``question``), as a string."""
    key = _first_key(obj, *keys)
    value = obj.get(key)
    if value is None:
        if required:
            raise importing.RowError(key, "is missing" + (f" (or '{keys[1]}')" if len(keys) > 1 else ""))
        return None
    if not isinstance(value, str):
        raise importing.RowError(key, f"must be a string, got {type(value).__name__}")
    if required and not blank and not value.strip():
        raise importing.RowError(key, "must not be empty")
    return value


@dataclass
class ProblemRow:
    text: str
    answer: str | None
    solution: str | None
    subject: str
    level: int | None
    source_id: str
    options: list[str] | None = None


def parse_problem(obj: Any) -> ProblemRow:
    if not isinstance(obj, dict):
        raise importing.RowError("", "a row must be a JSON object")
    text = _string(obj, "problem", "question", required=True, blank=False)
    level_raw = obj.get("level")
    level = None
    if level_raw is not None:
        match = LEVEL.match(str(level_raw).strip()) if isinstance(level_raw, (str, int)) else None
        if match is None or isinstance(level_raw, bool):
            raise importing.RowError("level", f"must look like 'Level 3', 3 or 'Level ?', got {level_raw!r}")
        level = None if match.group(1) == "?" else int(match.group(1))
    source_id = _identifier(obj, "unique_id", "question_id", "id") or ""
    if len(source_id) > 200:
        raise importing.RowError(_first_key(obj, "unique_id", "question_id", "id"), "is longer than 200 characters")
    subject = _string(obj, "subject", "category") or ""
    if len(subject) > 100:
        raise importing.RowError(_first_key(obj, "subject", "category"), "is longer than 100 characters")
    options = _options(obj)
    answer = _string(obj, "answer")
    if options is not None and answer is not None and (
            len(answer.strip()) != 1 or not "A" <= answer.strip().upper() < chr(ord("A") + len(options))):
        raise importing.RowError("answer", f"must be the letter of one of the {len(options)} options "
                                           f"(A–{chr(ord('A') + len(options) - 1)}), got {answer!r}")
    return ProblemRow(
        text=text or "", answer=answer, solution=_string(obj, "solution"),
        subject=subject, level=level, source_id=source_id, options=options,
    )


def regrade_solutions(problem_ids: Iterable[int], grader: Grader | None = None) -> int:
    """Grade again every solution of these problems that has an answer (a ground truth arrived or changed), with
    ``grader`` (default: math, the bank's)."""
    grader = grader or get_grader()
    problem_ids = list(problem_ids)
    changed = 0
    for start in range(0, len(problem_ids), 1000):
        solutions = list(Solution.objects.filter(problem_id__in=problem_ids[start:start + 1000],
                                                 final_answer__isnull=False).select_related("problem")
                         .only("pk", "final_answer", "is_correct", "problem__answer"))
        for solution in solutions:
            verdict = grader.grade(solution.problem.answer, solution.final_answer)
            if verdict != solution.is_correct and grader.needs_ground_truth:
                solution.is_correct = verdict
                changed += 1
        Solution.objects.bulk_update(solutions, ["is_correct"], batch_size=1000)
    return changed


def import_problems(path: Path | str, campaign: Campaign | None = None, *, skip_invalid: bool = False,
                    progress: bulk.ProgressCallback | None = None) -> importing.ImportReport:
    """Create or update ``campaign``'s problems (``None``: the staff bank), matched on ``unique_id``, else on
    the normalised text (``normalized_problem_text``). A row whose text is already the problem of another
    ``unique_id`` is counted in ``duplicate_texts`` and changes nothing. Solutions of a problem whose answer
    changed are graded again."""
    path = Path(path)
    report = importing.ImportReport(file=str(path))
    importing.validate_file(path, parse_problem, report, progress)
    if report.rejected_count and not skip_invalid:
        raise importing.ImportFailed(report)
    created = updated = duplicates = 0
    answer_changed: set[int] = set()
    clashes: list[tuple[int, importing.RowError]] = []
    with bulk.import_transaction():
        for batch in importing.valid_rows(path, parse_problem, settings.STEPLAB_IMPORT_BATCH, progress):
            rows = [row for _, row in batch]
            by_source: dict[str, Problem] = {}
            by_key: dict[str, Problem] = {}
            for known in owned_problems(campaign).filter(
                    Q(source_id__in=[r.source_id for r in rows if r.source_id])
                    | Q(key_sha256__in=[problem_key(r.text) for r in rows])):
                by_key[known.key_sha256] = known
                if known.source_id:
                    by_source[known.source_id] = known
            for number, row in batch:
                key = problem_key(row.text)
                problem = by_source.get(row.source_id) if row.source_id else None
                problem = problem or by_key.get(key)
                other = by_key.get(key)
                if problem is not None and other is not None and other.pk != problem.pk:
                    clashes.append((number, importing.RowError("problem", f"this text is already the problem "
                                                                          f"{other.source_id or other.pk!s}")))
                    continue
                if problem is not None and row.source_id and problem.source_id and problem.source_id != row.source_id:
                    # The same problem under a second unique_id (MATH train has one such pair): one problem is
                    # one row, so the first id keeps it and the row is only counted.
                    duplicates += 1
                    continue
                if problem is None:
                    problem = Problem(campaign=campaign, text=row.text)
                    created += 1
                else:
                    updated += 1
                    if problem.answer != row.answer:
                        answer_changed.add(problem.pk)
                problem.text, problem.answer, problem.solution = row.text, row.answer, row.solution
                problem.subject, problem.level, problem.options = row.subject, row.level, row.options
                problem.source_id = row.source_id or problem.source_id
                problem.save()
                by_key[problem.key_sha256] = problem
                if problem.source_id:
                    by_source[problem.source_id] = problem
            report.imported += len(rows)
        for number, error in clashes:
            report.reject(number, error)
            report.imported -= 1
        if clashes and not skip_invalid:  # raised inside the transaction: nothing is kept
            report.rejected.sort(key=lambda item: item.line)
            report.imported = 0
            raise importing.ImportFailed(report)
        regraded = regrade_solutions(answer_changed, campaign_grader(campaign))
    report.created = {"problems": created, "updated": updated, "duplicate_texts": duplicates, "regraded": regraded}
    return report


@dataclass
class SolutionRow:
    problem_id: str | None
    problem_text: str | None
    steps: list[str]
    candidates: list[list[str]] | None
    answer: str | None
    verifier_score: float | None
    generator: str
    sample_index: int | None
    generation: int | None
    is_quality_control: bool
    is_screening: bool
    gold_first_error: int | None
    provenance: dict[str, Any]


def _given_steps(raw_steps: Any) -> tuple[list[str], list[list[str]] | None]:
    """A row's ``steps`` list as step texts, and each step's candidate completions (None when each step has one)."""
    if not isinstance(raw_steps, list) or not raw_steps:
        raise importing.RowError("steps", "must be a non-empty list")
    steps: list[str] = []
    candidates: list[list[str]] = []
    for position, item in enumerate(raw_steps):
        # A step is a string, or (conversational mode) a list of candidate completions.
        options = item if isinstance(item, list) else [item]
        if not options or not all(isinstance(o, str) and o.strip() for o in options):
            raise importing.RowError(f"steps[{position}]", "must be a non-empty string or a list of them")
        candidates.append([o.strip() for o in options])
        steps.append(options[0].strip())
    return steps, None if all(len(options) == 1 for options in candidates) else candidates


def _solution_steps(obj: dict[str, Any], split_rule: str,
                    grader: Grader) -> tuple[list[str], list[list[str]] | None, str | None]:
    """A row's steps, candidates and answer: its ``steps`` list or its text split by ``split_rule``, and the answer
    it gives or else the grader's reading of the solution."""
    text_key = _first_key(obj, "solution", "response")
    text, raw_steps = obj.get(text_key), obj.get("steps")
    answer = _string(obj, "answer")
    if raw_steps is not None:
        steps, candidates = _given_steps(raw_steps)
        return steps, candidates, answer if answer is not None else grader.extract("\n\n".join(steps), steps)
    if isinstance(text, str) and text.strip():
        split = split_solution(text, split_rule)
        answer = answer if answer is not None else grader.answer_of(text, split)
        if not split.steps:
            raise importing.RowError(text_key, f"has no step under the step rule {split_rule!r}")
        return split.steps, None, answer
    if text is not None and not isinstance(text, str):
        raise importing.RowError(text_key, f"must be a string, got {type(text).__name__}")
    raise importing.RowError("solution", "is missing (give `solution` or `response` text, or a `steps` list)")


def _check_step_sizes(steps: list[str]) -> None:
    if len(steps) > settings.STEPLAB_MAX_STEPS_PER_SOLUTION:
        raise importing.RowError("steps", f"has {len(steps)} steps; the limit is "
                                          f"{settings.STEPLAB_MAX_STEPS_PER_SOLUTION}")
    for position, step in enumerate(steps):
        if len(step) > settings.STEPLAB_MAX_STEP_CHARS:
            raise importing.RowError(f"steps[{position}]",
                                     f"is longer than {settings.STEPLAB_MAX_STEP_CHARS} characters")


def _check_numbers(obj: dict[str, Any], steps: list[str]) -> None:
    """The verifier score is a number, the sample's counters integers, and the gold first error one of the steps."""
    score = obj.get("verifier_score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise importing.RowError("verifier_score", "must be a number")
    for key in ("sample_index", "generation", "gold_first_error"):
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise importing.RowError(key, "must be an integer")
    gold = obj.get("gold_first_error")
    if gold is not None and not -1 <= gold < len(steps):
        raise importing.RowError("gold_first_error",
                                 f"is {gold}, out of range for {len(steps)} steps (-1 = no error)")


def _flags(obj: dict[str, Any]) -> dict[str, bool]:
    flags = {}
    for key in ("is_quality_control", "is_screening"):
        value = obj.get(key, False)
        if not isinstance(value, bool):
            raise importing.RowError(key, "must be a boolean")
        flags[key] = value
    return flags


def _provenance(obj: dict[str, Any]) -> dict[str, Any]:
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        raise importing.RowError("provenance", "must be an object")
    if "pred" in obj:  # the benchmark's own reading of the answer: provenance, never the grade
        pred = obj["pred"]
        if pred is not None and not isinstance(pred, str):
            raise importing.RowError("pred", f"must be a string or null, got {type(pred).__name__}")
        provenance = {**provenance, "pred": pred}
    return provenance


def _generator(obj: dict[str, Any]) -> str:
    generator = _string(obj, "generator", "model") or ""
    if len(generator) > 200:
        raise importing.RowError(_first_key(obj, "generator", "model"), "is longer than 200 characters")
    return generator


def make_solution_parser(split_rule: str = "auto", grader: Grader | None = None) -> Callable[[Any], SolutionRow]:
    check_step_rule(split_rule)
    row_grader = grader or get_grader()

    def parse(obj: Any) -> SolutionRow:
        if not isinstance(obj, dict):
            raise importing.RowError("", "a row must be a JSON object")
        problem_id = _identifier(obj, "problem_id", "question_id")
        problem_text = _string(obj, "problem", "question")
        if not problem_id and not problem_text:
            raise importing.RowError("problem_id", "is missing (give `problem_id` or the `problem` text)")
        steps, candidates, answer = _solution_steps(obj, split_rule, row_grader)
        _check_step_sizes(steps)
        _check_numbers(obj, steps)
        flags = _flags(obj)
        provenance = _provenance(obj)
        generator = _generator(obj)
        score = obj.get("verifier_score")
        return SolutionRow(
            problem_id=problem_id, problem_text=problem_text, steps=steps, candidates=candidates, answer=answer,
            verifier_score=None if score is None else float(score), generator=generator,
            sample_index=obj.get("sample_index"), generation=obj.get("generation"),
            is_quality_control=flags["is_quality_control"], is_screening=flags["is_screening"],
            gold_first_error=obj.get("gold_first_error"), provenance=provenance,
        )

    return parse


def _resolve_problems(campaign: Campaign, rows: list[SolutionRow], *,
                      copy_from_bank: bool = True) -> dict[str, Problem]:
    by_source, by_key = resolve_problems(
        campaign, source_ids=[r.problem_id for r in rows if r.problem_id],
        keys=[problem_key(r.problem_text) for r in rows if r.problem_text and not r.problem_id],
        copy_from_bank=copy_from_bank)
    found = {f"id:{source_id}": problem for source_id, problem in by_source.items()}
    found.update((f"text:{key}", problem) for key, problem in by_key.items())
    return found


def _problem_key(row: SolutionRow) -> str:
    return f"id:{row.problem_id}" if row.problem_id else f"text:{problem_key(row.problem_text or '')}"


def import_solutions(path: Path | str, campaign: Campaign, *, skip_invalid: bool = False,
                     split_rule: str | None = None, generation: int | None = None,
                     progress: bulk.ProgressCallback | None = None) -> importing.ImportReport:
    """Import generator samples into a campaign, split into steps (``split_rule``, default the campaign's step
    rule) and graded against the ground truth by the campaign's grader."""
    path = Path(path)
    grader = campaign_grader(campaign)
    parse = make_solution_parser(split_rule or campaign.step_rule, grader)
    report = importing.ImportReport(file=str(path))
    importing.validate_file(path, parse, report, progress)
    # Unknown problems are row errors too: check them in a second, batched pass.
    unknown: list[tuple[int, importing.RowError]] = []
    for batch in importing.valid_rows(path, parse, settings.STEPLAB_IMPORT_BATCH, progress, "check"):
        problems = _resolve_problems(campaign, [row for _, row in batch], copy_from_bank=False)
        for number, row in batch:
            if _problem_key(row) not in problems:
                field, value = (("problem_id", row.problem_id) if row.problem_id
                                else ("problem", (row.problem_text or "")[:60]))
                unknown.append((number, importing.RowError(field, UNKNOWN_PROBLEM.format(value=value))))
    for number, error in unknown:
        report.reject(number, error)
    if report.rejected_count and not skip_invalid:
        report.rejected.sort(key=lambda item: item.line)
        raise importing.ImportFailed(report)
    bad_lines = {number for number, _ in unknown}
    counts = {"solutions": 0, "steps": 0, "graded_correct": 0, "graded_wrong": 0, "ungraded": 0}
    with bulk.import_transaction():
        for batch in importing.valid_rows(path, parse, settings.STEPLAB_IMPORT_BATCH, progress):
            batch = [(n, r) for n, r in batch if n not in bad_lines]
            problems = _resolve_problems(campaign, [row for _, row in batch])
            solutions = []
            for _, row in batch:
                problem = problems[_problem_key(row)]
                verdict = grader.grade(problem.answer, row.answer)
                counts["graded_correct" if verdict else "graded_wrong" if verdict is False else "ungraded"] += 1
                solutions.append(Solution(
                    campaign=campaign, problem=problem, generator=row.generator, sample_index=row.sample_index,
                    final_answer=row.answer, is_correct=verdict, verifier_score=row.verifier_score,
                    generation=row.generation if row.generation is not None else generation,
                    is_quality_control=row.is_quality_control, is_screening=row.is_screening,
                    gold_first_error=row.gold_first_error, pre_generated_steps=row.steps,
                    provenance={"source": "import_solutions", "file": path.name, **row.provenance},
                    content_sha256=content_digest(problem.text, row.steps),
                ))
            bulk.bulk_insert(solutions)
            steps = [Step(solution=s, index=i) for s, (_, row) in zip(solutions, batch, strict=True)
                     for i in range(len(row.steps))]
            bulk.bulk_insert(steps)
            completions: list[Completion] = []
            step_iter = iter(steps)
            for _, row in batch:
                for position, text in enumerate(row.steps):
                    step = next(step_iter)
                    options = row.candidates[position] if row.candidates else [text]
                    completions.extend(Completion(step=step, index=i, text=o) for i, o in enumerate(options))
            bulk.bulk_insert(completions)
            counts["solutions"] += len(solutions)
            counts["steps"] += len(steps)
            report.imported += len(batch)
    bulk.refresh_planner_statistics(Solution, Step, Completion)
    report.created = counts
    return report

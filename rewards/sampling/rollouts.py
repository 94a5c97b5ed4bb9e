"""Monte-Carlo step labels: how often continuations from a solution's step prefixes still reach the answer.

The estimate of step ``i`` (0-based) is the share of ``rollouts`` continuations, sampled from the problem's prompt
followed by ``steps[0..i]`` (the prefix including step ``i``), whose final answer ``stepcore.grading`` grades
correct against the solution's ground truth (Math-Shepherd). A step that ends the solution with its answer (the
``# Answer`` step, or the last step when it holds a gradable answer) is graded directly: 1.0 or 0.0, no rollouts.

``every_step`` estimates every step. ``binary_search`` (OmegaPRM) assumes the estimates fall to 0 at the first
wrong step and stay there: it grades the last step first (a solution whose answer is reached has no first error),
then bisects for the smallest ``i`` whose prefix no continuation completes correctly, estimating only the
prefixes it visits (about log2 of the step count instead of every step).

Output: one JSON line per solution, appended to ``output + ".partial"`` as each solution finishes (progress is its
line count) and renamed to ``output`` at the end. A run started again in the same folder skips the solutions that
file holds and counts on from the tokens its earlier runs spent (``output + ".tokens"``); a spent ``token_budget``
stops the run at its next request, every finished solution kept.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepcore.grading import answers_match  # Django-free: the importer's own grader
from stepcore.steps import ANSWER_HEADER, answer_from_steps

from ..node import JsonLineError, json_lines
from .config import RolloutConfig
from .sampler import BudgetedSampler, Sampler, SamplingStopped, finished_rows, make_sampler, to_prm800k


class SolutionsError(ValueError):
    """A bad row in the solutions file; the message names file, line and field."""


@dataclass(frozen=True)
class SolutionIn:
    solution_id: int
    problem: str
    answer: str
    steps: list[str]


@dataclass(frozen=True)
class Estimate:
    index: int
    correct: int
    rollouts: int  # 0: the step holds the solution's answer and was graded directly
    completion_tokens: int

    @property
    def value(self) -> float:
        return self.correct / self.rollouts if self.rollouts else float(self.correct)


def _row_error(path: Path, number: int, problem: str) -> SolutionsError:
    return SolutionsError(f"{path} line {number}: {problem}")


def read_solutions(path: Path, limit: int | None = None) -> list[SolutionIn]:
    """``solution_id`` (int), ``problem``, ``answer`` (the ground truth) and ``steps``; every row is checked before
    any model loads."""
    path = Path(path)
    solutions: list[SolutionIn] = []
    seen: dict[int, int] = {}
    with path.open(encoding="utf-8") as handle:
        try:
            for number, row in json_lines(handle):
                if not isinstance(row, dict):
                    raise _row_error(path, number, "a row must be a JSON object")
                solution_id = row.get("solution_id")
                if not isinstance(solution_id, int) or isinstance(solution_id, bool):
                    raise _row_error(path, number, f"field 'solution_id' must be an integer, got {solution_id!r:.80}")
                if solution_id in seen:
                    raise _row_error(path, number,
                                     f"field 'solution_id' {solution_id} repeats line {seen[solution_id]}")
                seen[solution_id] = number
                for key in ("problem", "answer"):
                    if not isinstance(row.get(key), str) or not row[key].strip():
                        raise _row_error(path, number, f"field '{key}' must be a non-empty string")
                steps = row.get("steps")
                if not isinstance(steps, list) or not steps:
                    raise _row_error(path, number, "field 'steps' must be a non-empty list of strings")
                for position, step in enumerate(steps):
                    if not isinstance(step, str) or not step.strip():
                        raise _row_error(path, number, f"field 'steps[{position}]' must be a non-empty string")
                solutions.append(SolutionIn(solution_id=solution_id, problem=row["problem"], answer=row["answer"],
                                            steps=steps))
        except JsonLineError as exc:
            raise _row_error(path, exc.number, f"not valid JSON ({exc.error.msg})") from None
    if not solutions:
        raise SolutionsError(f"{path}: no solutions")
    return solutions[:limit] if limit is not None else solutions


def _graded(ground_truth: str, answer: str | None) -> bool:
    """An answer that cannot be graded (none, or ungradable text) does not reach the ground truth."""
    return bool(answers_match(ground_truth, answer))


def _ends_with_answer(steps: list[str]) -> str | None:
    """The answer a prefix ends on: its last step is the ``# Answer`` block (PRM800K), or the solution's final
    step holding a ``\\boxed{}`` answer (ProcessBench); None when the prefix still needs a continuation."""
    if ANSWER_HEADER.match(steps[-1].strip().split("\n", 1)[0]):
        return answer_from_steps(steps) or ""
    return None


class Estimator:
    """Estimates of one solution's prefixes with one sampler, each prefix sampled at most once."""

    def __init__(self, config: RolloutConfig, sampler: Sampler, solution: SolutionIn) -> None:
        self.config = config
        self.sampler = sampler
        self.solution = solution
        self.prompt = config.prompt_template.format(problem=solution.problem)
        self.estimates: dict[int, Estimate] = {}

    def _seed(self, index: int) -> int:
        """Per (solution, step): an estimate does not depend on which prefixes or solutions came before."""
        key = f"{self.config.seed}:{self.solution.solution_id}:{index}".encode()
        return int(hashlib.sha256(key).hexdigest()[:8], 16)

    def estimate(self, index: int, *, last: bool = False) -> Estimate:
        """``last``: the prefix is the whole solution, whose own answer (``# Answer`` or ``\\boxed{}``) is graded
        directly when it has one."""
        if index in self.estimates:
            return self.estimates[index]
        prefix_steps = self.solution.steps[: index + 1]
        answer = _ends_with_answer(prefix_steps)
        if answer is None and last:
            answer = answer_from_steps(prefix_steps)
        if answer is not None:
            estimate = Estimate(index=index, correct=int(_graded(self.solution.answer, answer)), rollouts=0,
                                completion_tokens=0)
        else:
            prefix = "\n".join(step.strip() for step in prefix_steps) + "\n"
            samples = self.sampler.sample(self.prompt, self.config.rollouts, self._seed(index), prefix=prefix)
            # The prefix's own \boxed{} answer counts when the continuation gives none of its own.
            correct = sum(_graded(self.solution.answer, _final_answer(prefix + sample.text)) for sample in samples)
            estimate = Estimate(index=index, correct=correct, rollouts=len(samples),
                                completion_tokens=sum(sample.completion_tokens for sample in samples))
        self.estimates[index] = estimate
        return estimate


def _final_answer(text: str) -> str | None:
    formatted = to_prm800k(text)
    return formatted.answer if formatted is not None else None


def first_error(config: RolloutConfig, estimator: Estimator) -> int | None:
    """The first step whose prefix no continuation completes correctly, by the configured strategy; None when
    every step considered (the first ``max_steps``) still reaches the answer."""
    steps = estimator.solution.steps
    last = min(len(steps), config.max_steps or len(steps)) - 1
    whole = last == len(steps) - 1
    if config.strategy == "every_step":
        values = [estimator.estimate(index, last=whole and index == last).correct for index in range(last + 1)]
        return values.index(0) if 0 in values else None
    if estimator.estimate(last, last=whole).correct > 0:
        return None
    low, high = 0, last  # invariant: the estimate at ``high`` is 0, every step before ``low`` reaches the answer
    while low < high:
        middle = (low + high) // 2
        if estimator.estimate(middle).correct == 0:
            high = middle
        else:
            low = middle + 1
    return high


def label_solution(config: RolloutConfig, sampler: Sampler, solution: SolutionIn) -> dict[str, Any]:
    """One output row: the estimated steps (by index), the first error, and what they cost."""
    estimator = Estimator(config, sampler, solution)
    found = first_error(config, estimator)
    estimates = sorted(estimator.estimates.values(), key=lambda e: e.index)
    return {
        "solution_id": solution.solution_id, "strategy": config.strategy, "rollouts": config.rollouts,
        "steps": [{"index": e.index, "value": e.value, "correct": e.correct, "rollouts": e.rollouts}
                  for e in estimates],
        "first_error": found,
        "rollouts_used": sum(e.rollouts for e in estimates),
        "completion_tokens": sum(e.completion_tokens for e in estimates),
    }


def run_rollouts(config: RolloutConfig, sampler: Sampler | None = None) -> dict[str, Any]:
    """Label every solution not labeled by an earlier attempt, writing a line as each finishes; returns the summary
    (with the settings). ``SamplingStopped`` when the token budget is spent, the finished solutions kept."""
    started = time.time()
    solutions = read_solutions(config.solutions, config.limit)
    config.output.parent.mkdir(parents=True, exist_ok=True)
    partial = config.output.with_name(config.output.name + ".partial")
    earlier = finished_rows(partial)
    done = {int(row["solution_id"]) for row in earlier}
    budgeted = BudgetedSampler(sampler or make_sampler(config), config.token_budget,
                               ledger=config.output.with_name(config.output.name + ".tokens"))
    loaded = time.time()
    totals = {"solutions": 0, "steps_estimated": 0, "rollouts_used": 0, "completion_tokens": 0}
    for row in earlier:
        _add(totals, row)
    with partial.open("a", encoding="utf-8") as handle:
        for solution in solutions:
            if solution.solution_id in done:
                continue
            before = budgeted.spent
            try:
                row = label_solution(config, budgeted, solution)
            except SamplingStopped as stopped:
                raise SamplingStopped(f"{stopped} after {totals['solutions']:,} of {len(solutions):,} solutions; "
                                      "the finished ones are kept and the job continues from them when started "
                                      "again") from None
            row["tokens_spent"] = budgeted.spent - before
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()  # the web side counts lines for progress
            _add(totals, row)
    os.replace(partial, config.output)
    return {**totals, "resumed_solutions": len(earlier), "tokens_spent": budgeted.spent,
            "load_s": loaded - started, "sample_s": time.time() - loaded, "output": str(Path(config.output)),
            "settings": config.provenance()}


def _add(totals: dict[str, int], row: dict[str, Any]) -> None:
    totals["solutions"] += 1
    totals["steps_estimated"] += len(row["steps"])
    totals["rollouts_used"] += row["rollouts_used"]
    totals["completion_tokens"] += row["completion_tokens"]

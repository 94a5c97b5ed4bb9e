"""Sanity checks that catch a step scorer reading artefacts rather than maths (plain Python + NumPy, no Django).

A scorer that learned a dataset's answer format, likes a phrase, or ignores the order of the steps can still post
a fair AUROC. Each check perturbs the solutions in a way that should (or should not) move a sound scorer and
reports how far the scores moved:

* ``answer_rewrite``: mean ``|Δ score|`` of the steps holding an answer line when that line is rewritten into each
  other form (``# Answer\\n\\nX``, ``\\boxed{X}``, ``The answer is X.``); a sound scorer barely moves (≈ 0).
* ``harmless_prefix``: mean signed change in log-odds per step when every step starts with ``Let's note: ``
  (≈ 0 for a sound scorer).
* ``shuffle``: Spearman correlation between each step's score in the original order and in a seeded shuffle of
  its solution; near 1 means the scorer ignores what came before.
* ``last_step_lowest``: among flawed solutions, the share whose strictly lowest score is on the last step beside
  the share whose first error is there (a scorer that reads the answer line puts the lowest score last far more
  often than the data does).

Every figure is NaN when its ``n`` is 0.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .step_metrics import lowest_step_on_last_rate

__all__ = ["ANSWER_FORMS", "PREFIX", "SanityReport", "SanitySolution", "answer_line", "rewrite_answer",
           "sanity_checks", "spearman"]

PREFIX = "Let's note: "
ANSWER_FORMS = ("heading", "boxed", "phrase")
#: probabilities are clipped this far from 0 and 1 before taking log-odds
_EPS = 1e-6

_HEADING = re.compile(r"^[ \t]*#+[ \t]*Answer[ \t]*:?[ \t]*\n\s*(?P<value>\S.*?)\s*\Z", re.IGNORECASE | re.MULTILINE
                      | re.DOTALL)
_PHRASE = re.compile(r"\b(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*(?P<value>[^\n]+?)\s*\.?[ \t]*$",
                     re.IGNORECASE | re.MULTILINE)
_BOXED = "\\boxed{"


@dataclass(frozen=True)
class SanitySolution:
    """One solution: its problem, its steps, and the index of its first wrong step (None when all are right)."""

    problem: str
    steps: list[str]
    first_error: int | None = None


Scorer = Callable[[Sequence[SanitySolution]], list[list[float]]]


@dataclass(frozen=True)
class SanityReport:
    answer_rewrite_n: int
    answer_rewrite_mean_abs_change: float
    harmless_prefix_n: int
    harmless_prefix_mean_logit_change: float
    shuffle_n: int
    shuffle_spearman: float
    last_step_lowest_n: int
    last_step_lowest_model_rate: float
    last_step_lowest_data_rate: float

    def as_dict(self) -> dict[str, dict[str, float | int]]:
        return {
            "answer_rewrite": {"n": self.answer_rewrite_n, "mean_abs_change": self.answer_rewrite_mean_abs_change},
            "harmless_prefix": {"n": self.harmless_prefix_n,
                                "mean_logit_change": self.harmless_prefix_mean_logit_change},
            "shuffle": {"n": self.shuffle_n, "spearman": self.shuffle_spearman},
            "last_step_lowest": {"n": self.last_step_lowest_n, "model_rate": self.last_step_lowest_model_rate,
                                 "data_rate": self.last_step_lowest_data_rate},
        }


def _boxed_span(text: str) -> tuple[int, int, str] | None:
    """(start, end, value) of the first ``\\boxed{...}`` with balanced braces."""
    start = text.find(_BOXED)
    if start < 0:
        return None
    depth, index = 1, start + len(_BOXED)
    while index < len(text):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return start, index + 1, text[start + len(_BOXED):index]
        index += 1
    return None


def answer_line(step: str) -> tuple[str, int, int, str] | None:
    """(form, start, end, value) of the answer line in ``step``, or None when it holds none."""
    heading = _HEADING.search(step)
    if heading:
        return "heading", heading.start(), heading.end(), heading["value"]
    boxed = _boxed_span(step)
    if boxed:
        return "boxed", *boxed
    phrase = _PHRASE.search(step)
    if phrase:
        return "phrase", phrase.start(), phrase.end(), phrase["value"]
    return None


def _render(form: str, value: str) -> str:
    if form == "heading":
        return f"# Answer\n\n{value}"
    if form == "boxed":
        return f"$\\boxed{{{value.strip('$ ')}}}$"
    return f"The answer is {value}."


def rewrite_answer(step: str, form: str) -> str | None:
    """``step`` with its answer line in ``form``; None when it holds none or already has that form.

    A ``\\boxed{X}`` inside other mathematics keeps X in place and the new form follows as its own line, so the
    step's mathematics stays as it was."""
    found = answer_line(step)
    if found is None or found[0] == form:
        return None
    old, start, end, value = found
    if old != "boxed":
        return step[:start] + _render(form, value) + step[end:]
    unboxed = step[:start] + value + step[end:]
    return unboxed.rstrip() + "\n\n" + _render(form, value)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant or too short."""
    x, y = np.asarray(a, dtype=float).reshape(-1), np.asarray(b, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"{x.size} values against {y.size}")
    if x.size < 2:
        return float("nan")
    rx, ry = _average_ranks(x) - (x.size + 1) / 2.0, _average_ranks(y) - (y.size + 1) / 2.0
    denominator = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denominator) if denominator > 0 else float("nan")


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, _EPS, 1 - _EPS)
    return np.log(q / (1 - q))


def _scored(score: Scorer, solutions: Sequence[SanitySolution]) -> list[np.ndarray]:
    if not solutions:
        return []
    rows = score(solutions)
    if len(rows) != len(solutions):
        raise ValueError(f"the scorer returned {len(rows)} rows for {len(solutions)} solutions")
    out = []
    for number, (row, solution) in enumerate(zip(rows, solutions, strict=True)):
        values = np.asarray(row, dtype=float).reshape(-1)
        if values.size != len(solution.steps):
            raise ValueError(f"solution {number}: the scorer returned {values.size} scores for "
                             f"{len(solution.steps)} steps")
        out.append(values)
    return out


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _answer_rewrite(solutions: Sequence[SanitySolution], original: list[np.ndarray],
                    score: Scorer) -> tuple[int, float]:
    variants: list[SanitySolution] = []
    where: list[tuple[int, int]] = []  # (solution, step) of each variant's rewritten step
    for number, solution in enumerate(solutions):
        for index, step in enumerate(solution.steps):
            for form in ANSWER_FORMS:
                rewritten = rewrite_answer(step, form)
                if rewritten is not None:
                    steps = [*solution.steps[:index], rewritten, *solution.steps[index + 1:]]
                    variants.append(SanitySolution(solution.problem, steps, solution.first_error))
                    where.append((number, index))
    changes: dict[tuple[int, int], list[float]] = {}
    for (number, index), row in zip(where, _scored(score, variants), strict=True):
        changes.setdefault((number, index), []).append(abs(float(row[index] - original[number][index])))
    return len(changes), _mean([float(np.mean(c)) for c in changes.values()])


def _harmless_prefix(solutions: Sequence[SanitySolution], original: list[np.ndarray],
                     score: Scorer) -> tuple[int, float]:
    prefixed = [SanitySolution(s.problem, [PREFIX + step for step in s.steps], s.first_error) for s in solutions]
    changes = [_logit(after) - _logit(before)
               for before, after in zip(original, _scored(score, prefixed), strict=True) if before.size]
    flat = np.concatenate(changes) if changes else np.zeros(0)
    return int(flat.size), float(flat.mean()) if flat.size else float("nan")


def _shuffle(solutions: Sequence[SanitySolution], original: list[np.ndarray], score: Scorer,
             seed: int) -> tuple[int, float]:
    rng = np.random.default_rng(seed)
    kept, orders = [], []
    for number, solution in enumerate(solutions):
        size = len(solution.steps)
        if size < 2:
            continue
        order = rng.permutation(size)
        if (order == np.arange(size)).all():
            order = np.roll(order, 1)  # an unmoved solution says nothing about order
        kept.append(number)
        orders.append(order)
    shuffled = [SanitySolution(solutions[n].problem, [solutions[n].steps[i] for i in order], None)
                for n, order in zip(kept, orders, strict=True)]
    before, after = [], []
    for number, order, row in zip(kept, orders, _scored(score, shuffled), strict=True):
        before.append(original[number][order])  # position j of the shuffle holds original step order[j]
        after.append(row)
    if not before:
        return 0, float("nan")
    flat_before, flat_after = np.concatenate(before), np.concatenate(after)
    return int(flat_before.size), spearman(flat_before, flat_after)


def sanity_checks(solutions: Sequence[SanitySolution], score: Scorer, *, seed: int) -> SanityReport:
    """Run the four checks on ``solutions`` with ``score`` (solutions -> one score per step, in [0, 1], higher =
    more likely correct). ``score`` is called once on the solutions as given and once per perturbation, each time
    with a batch of solutions."""
    original = _scored(score, solutions)
    rewrite_n, rewrite_change = _answer_rewrite(solutions, original, score)
    prefix_n, prefix_change = _harmless_prefix(solutions, original, score)
    shuffle_n, shuffle_rho = _shuffle(solutions, original, score, seed)
    flawed = [number for number, s in enumerate(solutions) if s.first_error is not None and s.steps]
    model_rate = lowest_step_on_last_rate([original[n].tolist() for n in flawed], ties="strict")
    data_rate = (float(np.mean([solutions[n].first_error == len(solutions[n].steps) - 1 for n in flawed]))
                 if flawed else float("nan"))
    return SanityReport(answer_rewrite_n=rewrite_n, answer_rewrite_mean_abs_change=rewrite_change,
                        harmless_prefix_n=prefix_n, harmless_prefix_mean_logit_change=prefix_change,
                        shuffle_n=shuffle_n, shuffle_spearman=shuffle_rho,
                        last_step_lowest_n=len(flawed), last_step_lowest_model_rate=model_rate,
                        last_step_lowest_data_rate=data_rate)

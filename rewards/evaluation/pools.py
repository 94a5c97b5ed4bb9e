"""Best-of-N sample pools and the reader for the paper's scored-samples JSONL.

A :class:`Pool` is one problem's samples. Semantics follow OpenAI's released PRM800K evaluation script
(``openai/prm800k``, ``prm800k/eval/eval.py``):

* a sample's answer is ``sample["answer"]`` when that key is present (even when it is null), else
  ``sample["given_answer"]``, else None;
* a sample whose answer is None ("reached no answer") is dropped from every subset before anything
  is chosen, exactly like an empty padding slot. It is therefore never chosen and never counts as
  correct (for ``pass`` too: its ``is_correct`` is ignored);
* a missing score (None or NaN) is Steplab's extension (the script would crash on it): such a sample
  ranks below every scored sample of the same pool, and can only be chosen when no scored sample with
  an answer is in the subset.
"""
from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..node import JsonLineError, json_lines

__all__ = ["Pool", "ScoredSamplesError", "load_scored_samples", "parse_scored_sample", "pools_from_records",
           "sample_answer"]


@dataclass(frozen=True, eq=False)
class Pool:
    """One problem's samples as parallel arrays (length = number of real samples, no padding).

    ``answers``: tuple of str or None (None = no answer reached). ``is_correct``: bool array.
    ``prm_score`` / ``orm_score``: float arrays, NaN = missing. Build with :meth:`from_arrays`.
    """

    answers: tuple[str | None, ...]
    is_correct: np.ndarray
    prm_score: np.ndarray
    orm_score: np.ndarray
    problem: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_arrays(
        cls,
        answers: Sequence[str | None],
        is_correct: Sequence[bool] | np.ndarray,
        prm_score: Sequence[float | None] | np.ndarray | None = None,
        orm_score: Sequence[float | None] | np.ndarray | None = None,
        problem: str | None = None,
    ) -> Pool:
        answers_t = tuple(None if a is None else str(a) for a in answers)
        n = len(answers_t)
        correct = np.asarray(is_correct, dtype=bool).reshape(-1)
        if correct.shape[0] != n:
            raise ValueError(f"is_correct has {correct.shape[0]} entries, answers has {n}")
        return cls(
            answers=answers_t,
            is_correct=correct,
            prm_score=_scores(prm_score, n, "prm_score"),
            orm_score=_scores(orm_score, n, "orm_score"),
            problem=problem,
        )

    def __len__(self) -> int:
        return len(self.answers)

    @property
    def has_answer(self) -> np.ndarray:
        return np.fromiter((a is not None for a in self.answers), dtype=bool, count=len(self.answers))

    @property
    def effective_correct(self) -> np.ndarray:
        """Correct and reached an answer (a no-answer sample never counts, as in eval.py)."""
        return self.is_correct & self.has_answer

    def answer_correctness(self) -> dict[str, bool]:
        """Distinct answer -> correct. An answer string is correct when any sample giving it is marked
        correct (the grader is deterministic, so in practice all samples with that string agree)."""
        out: dict[str, bool] = {}
        for a, c in zip(self.answers, self.is_correct.tolist(), strict=True):
            if a is not None:
                out[a] = out.get(a, False) or bool(c)
        return out


def _scores(values: Any, n: int, name: str) -> np.ndarray:
    if values is None:
        return np.full(n, np.nan)
    arr = np.asarray([np.nan if v is None else v for v in values] if not isinstance(values, np.ndarray) else values,
                     dtype=float).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, answers has {n}")
    return arr


class ScoredSamplesError(ValueError):
    """A bad line in a scored-samples file; the message names file, line and field."""

    def __init__(self, path: str | Path, line: int, field_name: str | None, message: str):
        self.path, self.line, self.field = str(path), line, field_name
        where = f"{path}:{line}"
        super().__init__(f"{where}: field '{field_name}': {message}" if field_name else f"{where}: {message}")


def sample_answer(sample: dict[str, Any]) -> Any:
    """eval.py's rule: ``answer`` if the key is present (even null), else ``given_answer``."""
    return sample["answer"] if "answer" in sample else sample.get("given_answer")


def _score_field(obj: dict[str, Any], name: str) -> float:
    v = obj.get(name)
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"expected a number or null, got {v!r}")
    return float(v)


def parse_scored_sample(obj: Any, path: str | Path = "<input>",
                        line: int = 0) -> tuple[str, str | None, bool, float, float]:
    """Validate one decoded JSON sample; returns (problem, answer, is_correct, prm_score, orm_score)."""
    if not isinstance(obj, dict):
        raise ScoredSamplesError(path, line, None, f"expected a JSON object, got {type(obj).__name__}")
    if "problem" not in obj:
        raise ScoredSamplesError(path, line, "problem", "missing")
    problem = obj["problem"]
    if isinstance(problem, dict):  # tolerate a question object: key it canonically
        problem = json.dumps(problem, sort_keys=True)
    if not isinstance(problem, str):
        raise ScoredSamplesError(path, line, "problem", f"expected a string, got {problem!r:.80}")
    answer_field = "answer" if "answer" in obj else "given_answer"
    answer = sample_answer(obj)
    if answer is not None:
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise ScoredSamplesError(path, line, answer_field, f"expected a string or null, got {answer!r:.80}")
        answer = str(answer)
    correct = obj.get("is_correct")
    if correct is None:
        if answer is not None:
            raise ScoredSamplesError(path, line, "is_correct", "missing or null for a sample with an answer")
        correct = False
    elif not isinstance(correct, bool):
        raise ScoredSamplesError(path, line, "is_correct", f"expected true/false, got {correct!r:.80}")
    scores = []
    for name in ("prm_score", "orm_score"):
        try:
            scores.append(_score_field(obj, name))
        except TypeError as exc:
            raise ScoredSamplesError(path, line, name, str(exc)) from None
    return problem, answer, correct, scores[0], scores[1]


def _open_text(path: Path):
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_scored_samples(path: str | Path) -> list[Pool]:
    """Read a ``scored-test-samples.jsonl`` style file (optionally .gz) into one Pool per problem,
    in order of first appearance. Blank lines are skipped. Raises :class:`ScoredSamplesError`."""
    path = Path(path)
    groups: dict[str, list[tuple[str | None, bool, float, float]]] = {}
    with _open_text(path) as fh:
        try:
            for lineno, obj in json_lines(fh):
                problem, answer, correct, prm, orm = parse_scored_sample(obj, path, lineno)
                groups.setdefault(problem, []).append((answer, correct, prm, orm))
        except JsonLineError as exc:
            message = f"invalid JSON ({exc.error.msg} at column {exc.error.colno})"
            raise ScoredSamplesError(path, exc.number, None, message) from None
    if not groups:
        raise ScoredSamplesError(path, 0, None, "no samples in file")
    pools = []
    for problem, rows in groups.items():
        answers, corrects, prms, orms = zip(*rows, strict=True)
        pools.append(Pool.from_arrays(answers, corrects, np.array(prms), np.array(orms), problem=problem))
    return pools


def pools_from_records(records: Iterable[dict[str, Any]]) -> list[Pool]:
    """Group already-decoded sample dicts (same schema as the JSONL) into Pools."""
    groups: dict[str, list[tuple[str | None, bool, float, float]]] = {}
    for i, obj in enumerate(records, start=1):
        problem, answer, correct, prm, orm = parse_scored_sample(obj, "<records>", i)
        groups.setdefault(problem, []).append((answer, correct, prm, orm))
    return [
        Pool.from_arrays([r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows]),
                         np.array([r[3] for r in rows]), problem=p)
        for p, rows in groups.items()
    ]

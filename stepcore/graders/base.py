"""What a grader is: it reads a response's final answer and compares it with the problem's ground truth.

Plain Python (no Django): the sampler and the training node grade with the same classes the importers use.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..steps import SplitSolution

_ANSWER_PREFIX = re.compile(r"^(?:#\s*)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]?\s*", re.IGNORECASE)
MAX_ANSWER_CHARS = 2_000


class GraderConfigError(ValueError):
    """A grader's configuration is wrong; ``key`` names the field (as the job configs' errors do)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class Grader:
    """One way of grading an outcome. ``config`` is the campaign's plain-data configuration of it."""

    name: ClassVar[str]
    label: ClassVar[str]
    #: False for a grader whose verdict comes from people (the labeler rates the final answer)
    needs_ground_truth: ClassVar[bool] = True

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config = dict(config or {})

    def extract(self, text: str, steps: list[str] | None = None, options: list[str] | None = None) -> str | None:
        """The response's final answer: its last non-empty line, an "Answer:" prefix taken off."""
        lines = [line.strip() for line in (steps[-1] if steps else text).splitlines() if line.strip()]
        if not lines:
            return None
        answer = _ANSWER_PREFIX.sub("", lines[-1]).strip()
        return answer[:MAX_ANSWER_CHARS] or None

    def answer_of(self, text: str, split: SplitSolution) -> str | None:
        """The final answer of a response the importer has just split (``split``): by default read from the text."""
        return self.extract(text)

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        """True/False when both exist; None when there is nothing to grade."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """What exports record about the grader (the dataset card)."""
        return {"name": self.name, **({"config": self.config} if self.config else {})}


def normalized_text(value: str) -> str:
    """Case-, whitespace- and final-period-insensitive form of a short answer."""
    return re.sub(r"\s+", " ", value.strip().rstrip(".").strip()).casefold()

"""Exact match of short answers (case, surrounding spaces and a final period ignored)."""
from __future__ import annotations

from .base import Grader, normalized_text


class ExactGrader(Grader):
    name = "exact"
    label = "Exact match of the final answer line"

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        if ground_truth is None or answer is None or not ground_truth.strip() or not answer.strip():
            return None
        return normalized_text(ground_truth) == normalized_text(answer)

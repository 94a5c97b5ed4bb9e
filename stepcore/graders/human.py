"""Human: no ground truth. The labeler rates the final answer in the workspace, and that rating is the outcome."""
from __future__ import annotations

from .base import Grader


class HumanGrader(Grader):
    name = "human"
    label = "Human (the labeler rates the final answer; no ground truth)"
    needs_ground_truth = False

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        return None

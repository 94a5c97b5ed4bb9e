"""Math: the ``# Answer`` block or the last ``\\boxed{}``, compared with math-verify (``stepcore.grading``)."""
from __future__ import annotations

from ..grading import answers_match
from ..steps import SplitSolution, answer_from_steps, split_solution
from .base import Grader


class MathGrader(Grader):
    name = "math"
    label = "Math (math-verify: symbolic equivalence of the final answer)"

    def extract(self, text: str, steps: list[str] | None = None, options: list[str] | None = None) -> str | None:
        return answer_from_steps(steps) if steps is not None else split_solution(text, "auto").final_answer

    def answer_of(self, text: str, split: SplitSolution) -> str | None:
        return split.final_answer  # the rule's own reading: the "# Answer" block of a line split, else \\boxed

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        return answers_match(ground_truth, answer)

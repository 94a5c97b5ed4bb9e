"""Multiple choice: the letter a response chose from a fixed option list, against the problem's letter.

The letter is read from the response's answer line — "The answer is (X)", MMLU-Pro's 5-shot convention, and the
common variants models write instead ("the correct answer is X", "Answer: (X)", "the most accurate response is
(X)", "**Answer: X**"). The *first* answer line counts: base models often go on to invent the next question and
answer it too, and what they answered for this question is the line that ended their answer. A response that names
no letter on such a line is left without an answer (never a guess: a guess is not what the model chose).
"""
from __future__ import annotations

import re
import string

from .base import Grader

LETTERS = string.ascii_uppercase[:26]

# One pattern per spelling, most specific first; each captures the letter. "answer is (X)" comes first
# because it is the prompt's own convention (and the benchmark's extraction).
_ANSWER_LINES = [
    re.compile(r"answer is:?\s*\(?\*{0,2}([A-Z])\b\)?"),
    re.compile(r"(?:correct|best|right|final|most (?:accurate|appropriate|likely)) (?:answer|option|choice|response)"
               r"(?: would be| is| is option| is choice)?:?\s*\(?\*{0,2}([A-Z])\b\)?", re.IGNORECASE),
    re.compile(r"\b[Aa]nswer\s*:\s*\*{0,2}\(?([A-Z])\b\)?"),
    re.compile(r"\b(?:response|option|choice) is:?\s*\(([A-Z])\)"),
]


def read_letter(text: str, option_count: int = 26) -> str | None:
    """The letter chosen on the response's first answer line, when it names one of the ``option_count`` options."""
    allowed = LETTERS[:option_count]
    for pattern in _ANSWER_LINES:
        match = pattern.search(text)
        if match is not None and match.group(1) in allowed:
            return match.group(1)
    return None


def _letter_of(answer: str) -> str | None:
    """A ground truth or a stored answer as a letter: "C", "(C)", " c " are C."""
    value = answer.strip().strip("()").strip().upper()
    return value if len(value) == 1 and value in LETTERS else None


class MultipleChoiceGrader(Grader):
    name = "multiple_choice"
    label = "Multiple choice (the chosen letter of the problem's options)"

    def extract(self, text: str, steps: list[str] | None = None, options: list[str] | None = None) -> str | None:
        return read_letter(text, len(options) if options else 26)

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        if ground_truth is None or answer is None or not ground_truth.strip() or not answer.strip():
            return None
        gold, chosen = _letter_of(ground_truth), _letter_of(answer)
        return gold is not None and gold == chosen

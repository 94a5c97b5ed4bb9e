"""Final-answer grading with math-verify (symbolic equivalence), used on every imported solution.

math-verify's own timeouts use SIGALRM, which only works in the main thread; elsewhere (web threads,
Celery thread pools) we disable them rather than crash, and rely on the inputs' size limits instead.
"""
from __future__ import annotations

import logging
import re
import threading
from fractions import Fraction
from functools import lru_cache

MAX_ANSWER_CHARS = 2_000


def _timeout() -> int | None:
    return 5 if threading.current_thread() is threading.main_thread() else None


class _ExplainTimeout(logging.Filter):
    """math-verify warns a bare "Timeout during comparison" when a symbolic comparison runs past its limit (the
    demo's first line, before anything else was printed); say what happened and what it means for the grade."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == "Timeout during comparison":
            record.msg = ("grading: math-verify gave up comparing an answer with the ground truth after %s s (too "
                          "complex to decide symbolically); that answer is graded as not matching")
            record.args = (_timeout(),)
        return True


logging.getLogger("math_verify.grader").addFilter(_ExplainTimeout())


def normalize_answer(answer: str) -> str:
    """Whitespace- and wrapper-insensitive form used for exact matches and majority voting."""
    text = answer.strip()
    text = re.sub(r"^\$+|\$+$", "", text).strip()
    boxed = re.fullmatch(r"\\boxed\{(.*)\}", text, flags=re.S)
    if boxed:
        text = boxed.group(1)
    text = re.sub(r"\\(?:left|right|displaystyle|!|,|;|:)", "", text)
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return re.sub(r"\s+", "", text)


_INTEGER = re.compile(r"-?\d{1,30}")
_FRACTION = re.compile(r"(-?)\\frac\{(-?\d{1,30})\}\{(-?\d{1,30})\}|(-?\d{1,30})/(\d{1,30})")


def exact_rational(normalized: str) -> Fraction | None:
    """The value of an answer written as an integer or a fraction of integers (``-3``, ``\\frac{2}{4}``,
    ``7/2``), else None. Most MATH answers are such numbers: comparing them exactly gives math-verify's verdict
    without its LaTeX parser (a millisecond per answer, the largest cost of grading an import)."""
    if _INTEGER.fullmatch(normalized):
        return Fraction(int(normalized))
    match = _FRACTION.fullmatch(normalized)
    if match is None:
        return None
    sign, numerator, denominator = (match[1], match[2], match[3]) if match[2] is not None else ("", match[4], match[5])
    if int(denominator) == 0:
        return None
    value = Fraction(int(numerator), int(denominator))
    return -value if sign else value


# math-verify (and the sympy it loads, half a second) is imported on first use: most answers are graded by an
# exact comparison, and an import whose answers all are never needs it.
@lru_cache(maxsize=4096)
def _parsed(answer: str) -> tuple[object, ...]:
    from math_verify import parse

    return tuple(parse(f"${answer}$", parsing_timeout=_timeout()))


@lru_cache(maxsize=65536)
def answers_match(ground_truth: str | None, answer: str | None) -> bool | None:
    """True/False when both answers exist; None when there is nothing to grade. Cached per pair: an import
    grades the same (ground truth, answer) for every labeler of a solution and every sample that agrees."""
    if ground_truth is None or answer is None or not ground_truth.strip() or not answer.strip():
        return None
    if len(answer) > MAX_ANSWER_CHARS:
        return False
    gold_text, answer_text = normalize_answer(ground_truth), normalize_answer(answer)
    if gold_text == answer_text:
        return True
    gold_value, answer_value = exact_rational(gold_text), exact_rational(answer_text)
    if gold_value is not None and answer_value is not None:
        return gold_value == answer_value
    gold, target = _parsed(ground_truth), _parsed(answer)
    if not gold or not target:
        return False
    from math_verify import verify

    return bool(verify(list(gold), list(target), timeout_seconds=_timeout()))


_BOXED = re.compile(r"\\boxed\s*\{")


def extract_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} in text (balanced braces), or None."""
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    start = matches[-1].end()
    depth = 1
    for position in range(start, len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:position].strip()
    return None

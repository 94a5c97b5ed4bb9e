"""Final-answer grading with math-verify (symbolic equivalence), used on every imported solution.

math-verify's own timeouts use SIGALRM, which only works in the main thread; elsewhere (web threads,
Celery thread pools) we disable them rather than crash, and rely on the inputs' size limits instead.
"""
from __future__ import annotations

import re
import threading
from functools import lru_cache

from math_verify import parse, verify

MAX_ANSWER_CHARS = 2_000


def _timeout() -> int | None:
    return 5 if threading.current_thread() is threading.main_thread() else None


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


@lru_cache(maxsize=4096)
def _parsed(answer: str) -> tuple[object, ...]:
    return tuple(parse(f"${answer}$", parsing_timeout=_timeout()))  # type: ignore[arg-type]


@lru_cache(maxsize=65536)
def answers_match(ground_truth: str | None, answer: str | None) -> bool | None:
    """True/False when both answers exist; None when there is nothing to grade. Cached per pair: an import
    grades the same (ground truth, answer) for every labeler of a solution and every sample that agrees."""
    if ground_truth is None or answer is None or not ground_truth.strip() or not answer.strip():
        return None
    if len(answer) > MAX_ANSWER_CHARS:
        return False
    if normalize_answer(ground_truth) == normalize_answer(answer):
        return True
    gold, target = _parsed(ground_truth), _parsed(answer)
    if not gold or not target:
        return False
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

"""Cheap features read from a step's own text: an arithmetic check of its equalities, and counts.

A frozen sentence encoder places "6 × 255 = 1530" and "6 × 255 = 1520" almost on the same point: its vector says
what a step is about, not whether its arithmetic holds. These features say the latter, from the text alone (so
they are computable on any unlabeled solution a pool brings, and are the same for the PRM and the ORM):

* the **equality check**: every ``a = b`` (chains too) whose two sides are plain arithmetic (numbers, + − × ÷ /,
  powers, ``\\frac``, ``\\sqrt``, brackets) is evaluated; a side that names a variable or a function is skipped.
  Evaluation walks a parsed expression tree with bounded powers (no ``eval``, no sympy: microseconds a step);
* counts: numbers, operators, ``=`` signs, characters; a final ``\\boxed`` answer; how much of the step's wording
  repeats the problem's (a restatement).

Pure Python and numpy: ``rewards.training`` stays free of Django.
"""
from __future__ import annotations

import ast
import functools
import math
import operator
import re
from collections.abc import Callable, Sequence

import numpy as np

#: column names, in the order ``text_features`` returns them (saved with a head, so a change is visible)
NAMES = ("equalities_checked", "equalities_wrong", "any_wrong", "numbers", "operators", "equals", "length",
         "boxed", "problem_overlap")
_LATEX = (
    (re.compile(r"\\left|\\right|\\!|\\,|\\;|\\:|\\quad|\\qquad"), " "),
    (re.compile(r"\\(?:cdot|times|ast)"), "*"),
    (re.compile(r"\\div"), "/"),
    (re.compile(r"[×∙·]"), "*"),
    (re.compile(r"÷"), "/"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"\\%|%|\\\$|\$|\\\(|\\\)|\\\[|\\\]"), " "),
    (re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), ""),  # 1,000 -> 1000
)
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_IMPLICIT = re.compile(r"(?<=[\d)])\s*(?=\()")
_ROOT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_NTH_ROOT = re.compile(r"\\sqrt\s*\[([^\[\]{}]*)\]\s*\{([^{}]*)\}")
_MIXED = re.compile(r"(?<=\d)\s*(?=\\[dt]?frac)")  # 1825\frac{1}{3}: a mixed number
# "=" but not "==", "<=", ">=", "!=", "\ne"-style commands or ":=" definitions
_EQUALS = re.compile(r"(?<![<>!=:\\])=(?!=)")
_ARITH = "0123456789.+-*/^() "
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_OPERATORS = re.compile(r"[+\-*/^]|\\(?:cdot|times|div|frac|sqrt)|[×÷−]")
_WORD = re.compile(r"[A-Za-z]{3,}|\d+")
_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
MAX_SIDE = 120  # characters: longer "sides" are prose that happens to hold digits


def _plain(text: str) -> str:
    """LaTeX arithmetic as Python-like arithmetic (innermost fractions and roots first)."""
    for pattern, replacement in _LATEX:
        text = pattern.sub(replacement, text)
    text = _MIXED.sub("+", text)
    for _ in range(4):
        text, fractions = _FRACTION.subn(r"((\1)/(\2))", text)
        text, roots = _ROOT.subn(r"((\1)^0.5)", text)
        text, nth_roots = _NTH_ROOT.subn(r"((\2)^(1/(\1)))", text)
        if not fractions and not roots and not nth_roots:
            break
    text = text.replace("{", "(").replace("}", ")")
    return _IMPLICIT.sub("*", text)  # (2+3)(4), 2(3): implicit products


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > 64 or abs(left) > 1e6 or (left < 0 and right != int(right)):
                raise ValueError("power out of bounds")
            return float(left ** right)
        op = _OPS.get(type(node.op))
        if op is None:
            raise ValueError("operator")
        return op(left, right)
    raise ValueError("not arithmetic")


def evaluate(expression: str) -> float | None:
    """The value of a plain arithmetic expression, or None (not arithmetic, a division by zero, too large)."""
    text = expression.strip()
    if not text or len(text) > MAX_SIDE or not any(c.isdigit() for c in text):
        return None
    try:
        value = _value(ast.parse(text.replace("^", "**"), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError, MemoryError):
        return None
    return value if math.isfinite(value) else None


def _left_side(text: str) -> str | None:
    """The arithmetic run that ends a text (the left side of the "=" after it), if it stands on its own."""
    start = len(text)
    while start > 0 and text[start - 1] in _ARITH:
        start -= 1
    run = text[start:].strip()
    before = text[:start].rstrip()
    # "2x + 4" or "f(3)": the run is glued to a name; "7 \S 2": it follows a command; "... - c - 7": a term
    glued = 0 < start < len(text) and not text[start].isspace() and (before[-1:].isalnum() or before[-1:] in "_)]\\")
    command = re.search(r"\\[A-Za-z]+$", before) is not None
    signed = run[:1] == "-" and before[-1:] not in ("", "(", "=", ",", ":", ";")
    if not run or not (run[0].isdigit() or run[0] in "(-") or glued or command or signed:
        return None
    return run


def _right_side(text: str) -> str | None:
    """The arithmetic run that starts a text (the right side of the "=" before it), if it stands on its own."""
    end = 0
    while end < len(text) and text[end] in _ARITH:
        end += 1
    run = text[:end].strip()
    glued = 0 < end < len(text) and not text[end - 1].isspace() and (text[end].isalnum() or text[end] in "_(\\^")
    if not run or glued:  # "= 5x": the run is a coefficient, not the side
        return None
    return run.rstrip(".")


def _decimals(side: str) -> int:
    return max((len(m.group(0).split(".")[1]) for m in _NUMBER.finditer(side) if "." in m.group(0)), default=0)


def check_equalities(text: str) -> tuple[int, int]:
    """(equalities evaluated, equalities whose sides differ) in a step. A side shown with d decimals may be
    rounded: it agrees within half a unit of its last digit."""
    parts = _EQUALS.split(_plain(text))
    checked = wrong = 0
    for left_text, right_text in zip(parts, parts[1:], strict=False):
        left, right = _left_side(left_text), _right_side(right_text)
        if left is None or right is None or not any(c in "+-*/^" for c in (left + right).lstrip("-")):
            continue  # a bare number on both sides ("Step 2 = 5") is notation, not arithmetic
        a, b = evaluate(left), evaluate(right)
        if a is None or b is None:
            continue
        checked += 1
        tolerance = 0.5 * 10.0 ** -max(_decimals(left), _decimals(right)) if "." in left + right else 0.0
        if abs(a - b) > tolerance + 1e-9 * max(1.0, abs(a), abs(b)):
            wrong += 1
    return checked, wrong


#: how a model reads answer lines: rewritten into one neutral form before training and scoring, or as written
#: (a model trained before the rewrite)
ANSWER_FORMS = ("neutral", "as written")
# "\boxed{...}" with up to two levels of nested braces ("\boxed{\frac{1}{2}}")
_BRACED = r"\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}"
_ANSWER_LINES = (
    # "the final answer is $\boxed{5}$": one phrase, one answer
    (re.compile(r"(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*\$*\s*\\boxed\s*" + _BRACED + r"[ \t]*\$*",
                re.IGNORECASE), r"answer \1"),
    # its "$" delimiters go with it, not the line breaks around it
    (re.compile(r"\$*[ \t]*\\boxed\s*" + _BRACED + r"[ \t]*\$*"), r"answer \1"),
    # PRM800K's "# Answer" block (its answer on the lines after), "the (final) answer is", "Answer:"
    (re.compile(r"#+\s*(?:final\s+)?answer\s*:?\s*", re.IGNORECASE), "answer "),
    (re.compile(r"(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*|\bfinal\s+answer\s*:\s*|^answer\s*:\s*",
                re.IGNORECASE | re.MULTILINE), "answer "),
)


def neutral_answers(text: str) -> str:
    """``text`` with every answer line in one neutral form, ``answer X``: PRM800K's ``# Answer`` block, a
    ``\\boxed{X}`` and "the answer is X" read alike, so no feature (a word, a column, a vector) can tell which
    dataset's answer format a step was written in. Idempotent: the neutral form stays as it is."""
    for pattern, replacement in _ANSWER_LINES:
        text = pattern.sub(replacement, text)
    return text


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


# An ``alternatives`` export repeats each chosen prefix in every rated alternative's row after it: the demo's
# training rows hold 456,807 steps, about 46,000 of them distinct. Each (problem, step) is read once.
@functools.lru_cache(maxsize=1 << 16)
def _text_row(problem: str, step: str) -> tuple[float, ...]:
    checked, wrong = check_equalities(step)
    words = _words(step)
    overlap = len(words & _words(problem)) / len(words) if words else 0.0
    return (math.log1p(checked), math.log1p(wrong), float(wrong > 0),
            math.log1p(len(_NUMBER.findall(step))), math.log1p(len(_OPERATORS.findall(step))),
            math.log1p(len(_EQUALS.findall(step))), math.log1p(len(step)), float("\\boxed" in step), overlap)


def text_features(problem: str, step: str) -> np.ndarray:
    """One step's row of ``NAMES`` (counts on a log scale)."""
    return np.array(_text_row(problem, step), dtype=np.float32)


def steps_text_features(problem: str, steps: Sequence[str]) -> np.ndarray:
    """``text_features`` of each step, one row per step."""
    if not steps:
        return np.zeros((0, len(NAMES)), dtype=np.float32)
    return np.stack([text_features(problem, step) for step in steps])


#: column names of ``provenance_features``
PROVENANCE_NAMES = ("new_numbers", "new_number_share", "relative_length")


def provenance_features(problem: str, steps: Sequence[str]) -> np.ndarray:
    """Where a step's numbers come from, one row per step: how many it brings that neither the problem nor an
    earlier step wrote (log scale), their share of its numbers, and its length against the steps before it
    (log-length difference; 0 for the first). A wrong step often brings a number from nowhere."""
    seen = set(_NUMBER.findall(problem))
    lengths = [math.log1p(len(step)) for step in steps]
    rows = []
    for index, step in enumerate(steps):
        numbers = _NUMBER.findall(step)
        new = sum(number not in seen for number in numbers)
        earlier = sum(lengths[:index]) / index if index else lengths[index]
        rows.append((math.log1p(new), new / len(numbers) if numbers else 0.0, lengths[index] - earlier))
        seen.update(numbers)
    return np.array(rows, dtype=np.float32).reshape(len(steps), len(PROVENANCE_NAMES))

"""The answer grader (math-verify) on known equivalent and non-equivalent pairs."""
from __future__ import annotations

import pytest

from annotate.grading import answers_match, extract_boxed, normalize_answer

EQUIVALENT = [
    ("\\frac{1}{2}", "0.5"), ("\\frac12", "\\dfrac{1}{2}"), ("2\\sqrt{2}", "\\sqrt{8}"), ("29", " 29 "),
    ("\\boxed{7}", "7"), ("(1,2)", "(1, 2)"), ("x^2+2x+1", "(x+1)^2"), ("10\\%", "10\\%"),
]
DIFFERENT = [("\\frac{1}{2}", "\\frac{1}{3}"), ("29", "30"), ("2\\sqrt{2}", "2\\sqrt{3}"), ("(1,2)", "(2,1)")]


@pytest.mark.parametrize(("gold", "answer"), EQUIVALENT)
def test_equivalent_answers_match(gold: str, answer: str) -> None:
    assert answers_match(gold, answer) is True


@pytest.mark.parametrize(("gold", "answer"), DIFFERENT)
def test_different_answers_do_not_match(gold: str, answer: str) -> None:
    assert answers_match(gold, answer) is False


def test_nothing_to_grade_is_none() -> None:
    assert answers_match(None, "3") is None and answers_match("3", "") is None


def test_boxed_extraction_balances_braces() -> None:
    assert extract_boxed("so $\\boxed{\\frac{a}{b}}$ and \\boxed{x^{2}}") == "x^{2}"
    assert normalize_answer("$\\boxed{\\dfrac{1}{2}}$") == "\\frac{1}{2}"

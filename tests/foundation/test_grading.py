"""The answer grader (math-verify) on known equivalent and non-equivalent pairs."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from math_verify import parse, verify

from stepcore.grading import answers_match, exact_rational, extract_boxed, normalize_answer

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


def _spelled(numerator: int, denominator: int, style: int) -> str:
    if denominator == 1 and style == 0:
        return str(numerator)
    if style == 1:
        return f"{numerator}/{denominator}"
    sign = "-" if numerator < 0 else ""
    return f"{sign}\\frac{{{abs(numerator)}}}{{{denominator}}}"


@settings(max_examples=150, deadline=None)
@given(st.integers(-40, 40), st.integers(1, 12), st.integers(-40, 40), st.integers(1, 12),
       st.integers(0, 2), st.integers(0, 2))
def test_integers_and_fractions_are_graded_as_math_verify_grades_them(
        a: int, b: int, c: int, d: int, gold_style: int, answer_style: int) -> None:
    """The exact path for integers and fractions (no LaTeX parser) gives math-verify's own verdict."""
    gold, answer = _spelled(a, b, gold_style), _spelled(c, d, answer_style)
    assert exact_rational(normalize_answer(gold)) is not None and exact_rational(normalize_answer(answer)) is not None
    expected = bool(verify(parse(f"${gold}$"), parse(f"${answer}$")))
    assert answers_match(gold, answer) is expected, (gold, answer)


def test_only_integers_and_fractions_take_the_exact_path() -> None:
    assert exact_rational("\\frac{3}{0}") is None and exact_rational("0.5") is None
    assert exact_rational("2\\sqrt{2}") is None and exact_rational("1,000") is None
    assert exact_rational("-\\frac{2}{4}") == exact_rational("-1/2") == exact_rational("\\frac{-1}{2}")

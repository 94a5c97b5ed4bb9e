"""The step text features a head reads beside the backbone's vectors: the arithmetic check of a step's
equalities, and the counts (pure functions, no model)."""
from __future__ import annotations

import math

import pytest

from rewards.training.textfeatures import (
    NAMES,
    PROVENANCE_NAMES,
    check_equalities,
    evaluate,
    provenance_features,
    steps_text_features,
    text_features,
)


@pytest.mark.parametrize(("step", "expected"), [
    ("So $6 \\times 255 = 1530$.", (1, 0)),
    ("So $6 \\times 255 = 1520$.", (1, 1)),
    ("Since there were 18, \\(1/3 \\times 18 = 6\\) are taken back.", (1, 0)),
    ("So she has 3 + 4 = 8 apples.", (1, 1)),
    ("$\\frac{1}{3} = 0.33$", (1, 0)),  # a rounded side agrees within half a unit of its last digit
    ("$\\frac{1}{3} = 0.35$", (1, 1)),
    ("$\\sqrt{16} = 4$ and $2^{10} = 1024$", (2, 0)),
    ("$3 \\cdot 4 = 12 = 2 \\cdot 5$", (2, 1)),  # a chain: each neighbouring pair
    ("$5476/3=1825\\frac{1}{3}$", (1, 0)),  # a mixed number
    ("$(2+3)(4) = 20$", (1, 0)),  # an implicit product
    ("$1,000 + 1 = 1001$", (1, 0)),
])
def test_arithmetic_equalities_are_checked(step: str, expected: tuple[int, int]) -> None:
    assert check_equalities(step) == expected


@pytest.mark.parametrize("step", [
    "$2x + 4 = 10$",  # a side with a variable is an equation to solve, not arithmetic to check
    "$f(3) = 10$",
    "$x^2 + 4 = 0$",
    "Then $y = 5x$.",
    "Step 2 = 5",  # two bare numbers: notation
    "$8a + 4b - c - 7 = -9$",  # "- 7" is a term of a longer side
    "$7 \\S 2 = 3(7) + 5(2)$",  # an operator the check does not know
    "$\\sin(30) = 0.5$",
    "$a \\leq 3 + 4$ and $b \\neq 2 + 2$",
])
def test_sides_that_are_not_plain_arithmetic_are_skipped(step: str) -> None:
    assert check_equalities(step) == (0, 0)


def test_evaluation_is_bounded_and_refuses_what_is_not_arithmetic() -> None:
    assert evaluate("2^(3)") == 8.0
    assert evaluate("9^999999") is None  # a power past the bound is not computed
    assert evaluate("1/0") is None
    assert evaluate("__import__('os')") is None
    assert evaluate("1" * 200) is None  # longer than a side can be


def test_features_are_one_row_per_step_in_names_order() -> None:
    problem = "What is 6 times 255?"
    rows = steps_text_features(problem, ["We need 6 times 255.", "$6 \\times 255 = 1520$", "\\boxed{1520}"])
    assert rows.shape == (3, len(NAMES))
    column = dict(zip(NAMES, rows.T, strict=True))
    assert list(column["any_wrong"]) == [0.0, 1.0, 0.0]
    assert list(column["boxed"]) == [0.0, 0.0, 1.0]
    assert column["problem_overlap"][0] == 0.75 and column["problem_overlap"][2] == 0  # how much restates it
    assert (text_features(problem, "") == 0).all()
    assert steps_text_features(problem, []).shape == (0, len(NAMES))


def test_provenance_counts_the_numbers_no_earlier_text_wrote() -> None:
    problem = "Ann has 3 apples and 4 pears. How many fruits has she?"
    steps = ["She has 3 + 4 = 7 fruits.", "Twice that is 7 * 2 = 14.", "So the answer is 9.", "Yes, 3 and 4."]
    rows = provenance_features(problem, steps)
    assert rows.shape == (4, len(PROVENANCE_NAMES))
    column = dict(zip(PROVENANCE_NAMES, rows.T, strict=True))
    assert list(column["new_numbers"]) == pytest.approx([math.log1p(n) for n in (1, 2, 1, 0)])  # 7; 2, 14; 9
    assert list(column["new_number_share"]) == pytest.approx([1 / 3, 2 / 3, 1.0, 0.0])
    assert column["relative_length"][0] == 0  # the first step has no earlier steps to be compared with
    shorter = math.log1p(len(steps[2])) - (math.log1p(len(steps[0])) + math.log1p(len(steps[1]))) / 2
    assert column["relative_length"][2] == pytest.approx(shorter)
    assert provenance_features(problem, []).shape == (0, len(PROVENANCE_NAMES))

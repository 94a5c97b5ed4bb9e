"""The sanity checks move the way they should, with real tiny scorers: one that reads the answer format, one that
checks arithmetic, one that only sees step length, one that only sees position, one that likes a phrase."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pytest

from rewards.evaluation.sanity import (
    PREFIX,
    SanitySolution,
    answer_line,
    rewrite_answer,
    sanity_checks,
    spearman,
)

SUM = re.compile(r"(\d+)\s*([+*-])\s*(\d+)\s*=\s*(\d+)")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _solutions() -> list[SanitySolution]:
    return [
        SanitySolution("Add 2 and 3, then double.", ["2 + 3 = 5", "5 * 2 = 10", "# Answer\n\n10"], None),
        SanitySolution("Add 2 and 3, then double.", ["2 + 3 = 6", "6 * 2 = 12", "# Answer\n\n12"], 0),
        SanitySolution("Take 4 from 9, add 7.", ["9 - 4 = 5", "5 + 7 = 13", "So the total is $\\boxed{13}$."], 1),
        SanitySolution("Multiply 3 by 4, add 1.", ["3 * 4 = 12", "12 + 1 = 13", "The answer is 13."], None),
        SanitySolution("Multiply 6 by 7.", ["We multiply the two numbers given.", "6 * 7 = 42", "6 * 7 = 43",
                                           "# Answer\n\n43"], 2),
        SanitySolution("Add 8 and 8.", ["8 + 8 = 16", "Double check: 16 - 8 = 9", "# Answer\n\n16"], 1),
    ]


def _rows(solutions: Sequence[SanitySolution], step_score) -> list[list[float]]:
    return [[step_score(step, index, len(s.steps)) for index, step in enumerate(s.steps)] for s in solutions]


def format_scorer(solutions: Sequence[SanitySolution]) -> list[list[float]]:
    """Trusts the PRM800K answer heading, distrusts every other answer form: an artefact detector."""
    def one(step: str, index: int, size: int) -> float:
        if "# Answer" in step:
            return 0.95
        return 0.2 if ("boxed" in step or "answer is" in step.lower()) else 0.6
    return _rows(solutions, one)


def arithmetic_scorer(solutions: Sequence[SanitySolution]) -> list[list[float]]:
    """Low exactly where an ``a op b = c`` is wrong: reads the maths, not the wording."""
    def one(step: str, index: int, size: int) -> float:
        wrong = any(OPS[op](int(a), int(b)) != int(c) for a, op, b, c in SUM.findall(step))
        return 0.1 if wrong else 0.8
    return _rows(solutions, one)


def length_scorer(solutions: Sequence[SanitySolution]) -> list[list[float]]:
    return _rows(solutions, lambda step, index, size: 1.0 / (1.0 + len(step) / 20.0))


def position_scorer(solutions: Sequence[SanitySolution]) -> list[list[float]]:
    """Only where the step sits: later steps are trusted less (order is all it sees)."""
    return _rows(solutions, lambda step, index, size: 0.9 - 0.8 * index / max(size - 1, 1))


def phrase_scorer(solutions: Sequence[SanitySolution]) -> list[list[float]]:
    return _rows(solutions, lambda step, index, size: 0.9 if step.startswith("Let's") else 0.5)


def _form_and_value(step: str) -> tuple[str, str] | None:
    found = answer_line(step)
    return None if found is None else (found[0], found[3])


def test_answer_forms_are_found_and_rewritten_keeping_the_value():
    assert _form_and_value("# Answer\n\n10") == ("heading", "10")
    assert _form_and_value("So the total is $\\boxed{\\frac{1}{2}}$.") == ("boxed", "\\frac{1}{2}")
    assert _form_and_value("The answer is 13.") == ("phrase", "13")
    assert answer_line("2 + 3 = 5") is None
    assert rewrite_answer("# Answer\n\n10", "boxed") == "$\\boxed{10}$"
    assert rewrite_answer("# Answer\n\n10", "phrase") == "The answer is 10."
    assert rewrite_answer("The answer is 13.", "heading") == "# Answer\n\n13"
    assert rewrite_answer("So the total is $\\boxed{13}$.", "heading") == "So the total is $13$.\n\n# Answer\n\n13"
    assert rewrite_answer("# Answer\n\n10", "heading") is None


def test_answer_rewrite_moves_a_format_reader_and_not_an_arithmetic_checker():
    solutions = _solutions()
    fooled = sanity_checks(solutions, format_scorer, seed=0).as_dict()["answer_rewrite"]
    sound = sanity_checks(solutions, arithmetic_scorer, seed=0).as_dict()["answer_rewrite"]
    assert fooled["n"] == sound["n"] == 6  # the six last steps hold an answer line
    assert fooled["mean_abs_change"] > 0.3
    assert sound["mean_abs_change"] == 0.0


def test_harmless_prefix_moves_a_scorer_that_likes_the_phrase():
    solutions = _solutions()
    steps = sum(len(s.steps) for s in solutions)
    liked = sanity_checks(solutions, phrase_scorer, seed=0).as_dict()["harmless_prefix"]
    sound = sanity_checks(solutions, arithmetic_scorer, seed=0).as_dict()["harmless_prefix"]
    assert liked["n"] == sound["n"] == steps
    assert liked["mean_logit_change"] == pytest.approx(math.log(9))  # 0.5 -> 0.9 on every step
    assert sound["mean_logit_change"] == 0.0
    shorter = sanity_checks(solutions, length_scorer, seed=0).as_dict()["harmless_prefix"]
    assert shorter["mean_logit_change"] < 0  # a longer step looks worse to a length scorer
    assert PREFIX == "Let's note: "


def test_shuffle_is_one_for_an_order_blind_scorer_and_lower_for_an_order_aware_one():
    solutions = _solutions()
    blind = sanity_checks(solutions, length_scorer, seed=3).as_dict()["shuffle"]
    aware = sanity_checks(solutions, position_scorer, seed=3).as_dict()["shuffle"]
    assert blind["n"] == aware["n"] == sum(len(s.steps) for s in solutions)
    assert blind["spearman"] == pytest.approx(1.0)
    assert aware["spearman"] < 0.5
    again = sanity_checks(solutions, position_scorer, seed=3).as_dict()["shuffle"]
    assert again == aware  # seeded


def test_last_step_lowest_sits_beside_the_data_rate():
    solutions = _solutions()
    flawed = [s for s in solutions if s.first_error is not None]
    data_rate = sum(s.first_error == len(s.steps) - 1 for s in flawed) / len(flawed)
    reader = sanity_checks(solutions, format_scorer, seed=0).as_dict()["last_step_lowest"]
    checker = sanity_checks(solutions, arithmetic_scorer, seed=0).as_dict()["last_step_lowest"]
    assert reader["n"] == checker["n"] == len(flawed) == 4
    assert reader["data_rate"] == checker["data_rate"] == data_rate == 0.0
    # the format reader's lowest is the boxed last step once; the heading steps are its highest
    assert reader["model_rate"] == 0.25
    assert checker["model_rate"] == 0.0
    # a tie with an earlier step does not count: the position scorer is strictly lowest last on every solution
    assert sanity_checks(solutions, position_scorer, seed=0).as_dict()["last_step_lowest"]["model_rate"] == 1.0
    flat = sanity_checks(solutions, lambda batch: [[0.5] * len(s.steps) for s in batch], seed=0)
    assert flat.as_dict()["last_step_lowest"]["model_rate"] == 0.0


def test_report_shape_and_empty_input():
    report = sanity_checks([], length_scorer, seed=0).as_dict()
    assert set(report) == {"answer_rewrite", "harmless_prefix", "shuffle", "last_step_lowest"}
    assert report["answer_rewrite"]["n"] == report["shuffle"]["n"] == report["last_step_lowest"]["n"] == 0
    assert math.isnan(report["shuffle"]["spearman"]) and math.isnan(report["last_step_lowest"]["data_rate"])


def test_a_scorer_that_returns_the_wrong_number_of_scores_is_refused():
    with pytest.raises(ValueError, match="solution 0: the scorer returned 1 scores for 3 steps"):
        sanity_checks(_solutions(), lambda batch: [[0.5] for _ in batch], seed=0)


def test_spearman_matches_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505138)  # scipy.stats.spearmanr
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))

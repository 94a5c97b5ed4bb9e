"""Graders and step rules on real rows from ``shared/`` (MMLU-Pro, MATH): plain functions, no database."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from stepcore.graders import GRADERS, GraderConfigError, get_grader
from stepcore.steps import check_step_rule, split_solution


def _rows(path: Path, count: int) -> list[dict]:  # type: ignore[type-arg]
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in itertools.islice(handle, count)]


def test_registry_names_every_grader_and_refuses_an_unknown_one() -> None:
    assert set(GRADERS) == {"math", "multiple_choice", "exact", "regex", "human"}
    with pytest.raises(GraderConfigError) as error:
        get_grader("astrology")
    assert error.value.key == "grader"
    with pytest.raises(GraderConfigError) as error:
        get_grader("regex", {"pattern": "(unclosed"})
    assert error.value.key == "pattern"


def test_multiple_choice_reads_the_letter_mmlu_pro_read_on_real_responses(shared_data: Path) -> None:
    grader = get_grader("multiple_choice")
    rows = [row for row in _rows(shared_data / "mmlu-pro/responses.jsonl", 3000) if row["pred"] is not None]
    agree = sum(grader.extract(row["response"]) == row["pred"] for row in rows)
    assert len(rows) > 2000 and agree / len(rows) >= 0.99
    # variants the benchmark's own pattern misses, and a letter outside the options
    assert grader.extract("Hence, the most accurate response is (E).") == "E"
    assert grader.extract("**Answer: C**") == "C"
    assert grader.extract("The answer is (J).", options=["x"] * 4) is None
    # the first answer line counts: a base model that goes on to invent the next question does not change its pick
    assert grader.extract("... The answer is (B).\n\nQuestion: next one ... The answer is (D).") == "B"
    assert grader.grade("B", "B") is True and grader.grade("B", "(c)") is False and grader.grade("B", None) is None


def test_multiple_choice_grades_real_rows_against_the_gold_letter(shared_data: Path) -> None:
    questions = {row["question_id"]: row for row in _rows(shared_data / "mmlu-pro/questions.jsonl", 400)}
    grader = get_grader("multiple_choice")
    verdicts = [grader.grade(questions[row["question_id"]]["answer"], grader.extract(row["response"]))
                for row in _rows(shared_data / "mmlu-pro/responses.jsonl", 400) if row["question_id"] in questions]
    assert verdicts.count(True) > 50 and verdicts.count(False) > 50


def test_math_grader_is_math_verify_on_real_math500_answers(shared_data: Path) -> None:
    grader = get_grader("math")
    for row in _rows(shared_data / "math/math500.jsonl", 30):
        found = grader.extract(row["solution"])
        assert found is not None and grader.grade(row["answer"], found) is True, row["unique_id"]
    assert grader.grade("\\frac{1}{2}", "0.5") is True and grader.grade("2", "3") is False


def test_exact_and_regex_graders_on_real_answers(shared_data: Path) -> None:
    exact, regex = get_grader("exact"), get_grader("regex")
    question = _rows(shared_data / "mmlu-pro/questions.jsonl", 1)[0]
    option = question["options"][question["answer_index"]]
    response = f"Reasoning about it.\nAnswer: {option.upper()}."
    assert exact.grade(option, exact.extract(response)) is True
    assert exact.grade(question["options"][0], exact.extract(response)) is (question["answer_index"] == 0)
    assert regex.grade(r"unsafe practices.*serious", exact.extract(response)) is True
    assert regex.grade(r"safe", "unsafe practices") is False  # a full match, not a search
    assert regex.grade("(broken", "x") is False
    configured = get_grader("regex", {"pattern": r"answer is \(([A-J])\)"})
    assert configured.extract("so the answer is (C). Then the answer is (D).") == "D"


def test_human_grader_never_grades_on_its_own() -> None:
    human = get_grader("human")
    assert not human.needs_ground_truth and human.grade("A", "A") is None
    assert human.extract("Some reasoning.\n\nFinal answer: the contract is void.") == "the contract is void."


@pytest.mark.parametrize(("rule", "text", "steps"), [
    ("newline", "Step one.\nStep two.\n# Answer\n\n4", ["Step one.", "Step two.", "# Answer\n\n4"]),
    ("paragraph", "First, a.\nStill first.\n\nSecond.", ["First, a.\nStill first.", "Second."]),
    ("sentence", "The U.S. rule, e.g. in Dr. Smith's case, is 3.5 years. It applies! Does it? Yes.\nNew line",
     ["The U.S. rule, e.g. in Dr. Smith's case, is 3.5 years.", "It applies!", "Does it?", "Yes.", "New line"]),
    ("regex:\\n-{3,}\\n", "part one\n---\npart two\n-----\npart three", ["part one", "part two", "part three"]),
    ("regex:(;)\\s*", "a; b;c", ["a", "b", "c"]),
])
def test_step_rules(rule: str, text: str, steps: list[str]) -> None:
    assert split_solution(text, rule).steps == steps


def test_step_rules_refuse_unknown_names_and_patterns_that_cut_everywhere() -> None:
    for bad, word in (("words", "unknown step rule"), ("regex:", "pattern of 1"), ("regex:(", "not a valid"),
                      ("regex:x*", "empty string")):
        with pytest.raises(ValueError, match=word):
            check_step_rule(bad)
    assert check_step_rule("regex:\\n\\n") == "regex:\\n\\n"


def test_sentence_rule_on_real_mmlu_pro_responses(shared_data: Path) -> None:
    rows = _rows(shared_data / "mmlu-pro/responses.jsonl", 200)
    for row in rows:
        steps = split_solution(row["response"], "sentence").steps
        assert steps and " ".join(steps).split() == row["response"].split()  # nothing lost, nothing added
    assert sum(len(split_solution(row["response"], "sentence").steps) > 1 for row in rows) > 150


def test_a_step_with_a_code_block_is_markdown_highlighted_and_sanitised() -> None:
    from annotate.rendering import step_source

    hostile = ("Run it:\n\n```python\nx = \"<script>alert(1)</script>\"\nprint(x)\n```\n\n"
               "So $x^2$ holds. <img src=x onerror=alert(1)><script>alert(2)</script>")
    rendered = str(step_source(hostile))
    assert '<div class="codehilite">' in rendered and '<span class="nb">print</span>' in rendered
    assert "<script" not in rendered and "onerror" not in rendered and "$x^2$" in rendered
    # prose and math stay plain text (escaped by the template), as every math step was
    assert step_source("So $x^2 = 4$ <b>") == "So $x^2 = 4$ <b>"

"""Step rules come from one registry, and every pattern people supply runs on RE2: a catastrophic pattern answers
at once, and one RE2 cannot take is refused with its reason."""
from __future__ import annotations

import pytest

from annotate.models import Campaign
from stepcore.graders import GraderConfigError, get_grader
from stepcore.steprules import RULES, STEP_RULE_DETAIL, STEP_RULE_HELP, StepRuleError, parse_step_rule
from stepcore.steps import check_step_rule, split_solution

CATASTROPHIC = "regex:(a+)+$"
VICTIM = "a" * 31 + "b"  # 32 characters: about 2**31 steps for a backtracking engine


def test_a_catastrophic_step_rule_splits_at_once(no_hang) -> None:
    with no_hang():
        assert split_solution(VICTIM, CATASTROPHIC).steps == [VICTIM]  # (a+)+$ never matches before the b
        assert split_solution("xaa", CATASTROPHIC).steps == ["x"]


@pytest.mark.parametrize(("rule", "words"), [
    ("regex:(a)\\1", "invalid escape sequence"),  # a backreference
    ("regex:(?<=a)b", "invalid perl operator"),  # lookbehind
    ("regex:(", "not a valid pattern"),
    ("regex:x*", "empty string"),
    ("words", "unknown step rule"),
])
def test_rules_the_engine_cannot_take_are_refused_with_the_reason(rule: str, words: str) -> None:
    with pytest.raises(StepRuleError) as refused:
        check_step_rule(rule)
    assert words in str(refused.value)


def test_every_rule_and_alias_parses_and_help_texts_come_from_the_registry() -> None:
    for name in ("auto", "lines", "newline", "paragraphs", "paragraph", "sentence", "regex:\\n-{3,}\\n"):
        assert str(parse_step_rule(name)) == name
    assert Campaign._meta.get_field("step_rule").help_text == STEP_RULE_HELP
    for kind in RULES.values():
        assert kind.name in STEP_RULE_DETAIL and kind.help in STEP_RULE_DETAIL


def test_sentence_rule_stays_right_over_a_long_run_of_abbreviations(no_hang) -> None:
    text = "See Dr. " * 50_000 + "Smith. Then stop."
    with no_hang():
        steps = split_solution(text, "sentence").steps
    assert steps == [text[:-len(" Then stop.")], "Then stop."]


def test_the_regex_grader_runs_a_catastrophic_ground_truth_at_once(no_hang) -> None:
    grader = get_grader("regex")
    with no_hang():
        assert grader.grade("(a+)+$", VICTIM) is False
        assert grader.grade("(A+)+b", VICTIM) is True  # case ignored, as before
        configured = get_grader("regex", {"pattern": "(a+)+$"})
        assert configured.extract(VICTIM) is None


def test_a_grader_pattern_re2_refuses_is_refused_when_saved() -> None:
    with pytest.raises(GraderConfigError, match="RE2") as refused:
        get_grader("regex", {"pattern": "(\\w+) \\1"})
    assert refused.value.key == "pattern"

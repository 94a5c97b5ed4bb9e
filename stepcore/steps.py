"""How a solution text becomes steps: the step rules (``stepcore.steprules``, one module per rule) applied.

* ``lines`` (``newline``) — PRM800K's convention: one step per non-empty line; a line starting with ``# Answer``
  opens the final block, which becomes one last step ``"# Answer\\n\\n<answer>"``, and ``<answer>`` is
  the solution's final answer.
* ``paragraphs`` (``paragraph``) — one step per blank-line-separated paragraph; the final answer is the last
  ``\\boxed{…}``.
* ``auto`` (default) — ``lines`` when the text has a ``# Answer`` line, else ``paragraphs``.
* ``sentence`` — one step per sentence; a line break also ends a step, common abbreviations do not.
* ``regex:PATTERN`` — the text is cut wherever ``PATTERN`` matches (RE2, linear time; the separator is dropped).

A campaign names its rule (``Campaign.step_rule``); the final answer found here is the math convention's (``#
Answer`` or the last ``\\boxed{}``): other domains read it with their grader (``stepcore.graders``).
"""
from __future__ import annotations

from .grading import extract_boxed
from .steprules import (
    ANSWER_HEADER,
    MAX_RULE_CHARS,
    PLAIN_RULES,
    REGEX_PREFIX,
    SplitSolution,
    StepRuleError,
    parse_step_rule,
)

SPLIT_RULES = PLAIN_RULES


def check_step_rule(rule: str) -> str:
    """``rule`` when it names a usable step rule, else StepRuleError (a ValueError) saying why."""
    parse_step_rule(rule)
    return rule


def split_solution(text: str, rule: str = "auto") -> SplitSolution:
    return parse_step_rule(rule).split(text)


def answer_from_steps(steps: list[str]) -> str | None:
    """The final answer of a solution given as a list of steps (PRM800K `# Answer` block or \\boxed)."""
    if steps:
        header = ANSWER_HEADER.match(steps[-1].strip().split("\n", 1)[0])
        if header:
            body = steps[-1].strip().split("\n", 1)
            answer = (header.group(1) + "\n" + (body[1] if len(body) > 1 else "")).strip()
            return answer or None
    for step in reversed(steps):
        boxed = extract_boxed(step)
        if boxed is not None:
            return boxed
    return None


__all__ = ["ANSWER_HEADER", "MAX_RULE_CHARS", "REGEX_PREFIX", "SPLIT_RULES", "SplitSolution", "StepRuleError",
           "answer_from_steps", "check_step_rule", "split_solution"]

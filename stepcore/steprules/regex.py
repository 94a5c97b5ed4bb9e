"""``regex:PATTERN``: the text is cut wherever ``PATTERN`` matches (the separator is dropped).

The pattern runs on RE2 (``stepcore.patterns``), in time linear in the text: RE2 syntax, no backreferences or
lookaround. A pattern that matches the empty string would cut everywhere and is refused.
"""
from __future__ import annotations

from ..patterns import PatternError, compile_pattern
from .base import RuleKind, SplitSolution, StepRuleError, boxed_answer

PREFIX = "regex:"
MAX_RULE_CHARS = 200


def check_pattern(pattern: str) -> None:
    rule = PREFIX + pattern
    if not pattern or len(rule) > MAX_RULE_CHARS:
        raise StepRuleError(f"a regex step rule needs a pattern of 1 to {MAX_RULE_CHARS - len(PREFIX)} characters")
    try:
        compiled = compile_pattern(pattern)
    except PatternError as error:
        raise StepRuleError(f"step rule {rule!r}: {error}") from None
    if compiled.fullmatch("") is not None:
        raise StepRuleError(f"step rule {rule!r}: the pattern matches the empty string, so it would cut everywhere")


def split_regex(text: str, pattern: str) -> SplitSolution:
    compiled = compile_pattern(pattern)
    parts = compiled.split(text)
    # groups in the pattern would put the separators among the parts: keep only the text between matches
    texts = parts[::compiled.groups + 1]
    return SplitSolution([part.strip() for part in texts if part and part.strip()], boxed_answer(text))


RULE = RuleKind(name="regex", split=split_regex, check_argument=check_pattern,
                help="cut wherever PATTERN matches (RE2 syntax: no backreferences or lookaround)")

"""Step rules, one module each, behind one registry: how a response is cut into steps.

A campaign stores its rule as text (``Campaign.step_rule``: ``auto``, ``sentence``, ``regex:PATTERN`` …); every
place that takes one — the model's service, the settings and import forms, the API serializers, the management
commands, pool uploads — parses it here (``parse_step_rule``) and shows the help built here (``STEP_RULE_HELP``).

Plain Python: Django-free code (the sampler, the training node) may import it.
"""
from __future__ import annotations

from argparse import ArgumentTypeError
from dataclasses import dataclass

from . import auto, lines, paragraphs, regex, sentence
from .base import ANSWER_HEADER, RuleKind, SplitSolution, StepRuleError

RULES: dict[str, RuleKind] = {kind.name: kind for kind in (
    auto.RULE, lines.RULE, paragraphs.RULE, sentence.RULE, regex.RULE)}
_NAMES: dict[str, RuleKind] = {name: kind for kind in RULES.values() for name in (kind.name, *kind.aliases)}
#: the rules named by a plain word (every rule but ``regex:PATTERN``), aliases included
PLAIN_RULES: tuple[str, ...] = tuple(name for name, kind in _NAMES.items() if kind.check_argument is None)
REGEX_PREFIX = regex.PREFIX
MAX_RULE_CHARS = regex.MAX_RULE_CHARS
#: the model field's help (the settings pages' names: the first alias of lines and paragraphs)
STEP_RULE_HELP = "How responses are cut into steps: " + ", ".join(
    f"{kind.aliases[0] if kind.aliases else kind.name}{':PATTERN' if kind.check_argument else ''}"
    for kind in RULES.values()) + "."
STEP_RULE_DETAIL = "; ".join(
    f"{kind.name}{':PATTERN' if kind.check_argument else ''}"
    f"{' (also ' + ', '.join(kind.aliases) + ')' if kind.aliases else ''} — {kind.help}" for kind in RULES.values())


@dataclass(frozen=True)
class StepRule:
    """A valid step rule: its kind and its argument (a pattern, or "")."""

    kind: RuleKind
    argument: str = ""
    #: the text as given ("newline" stays "newline")
    value: str = "auto"

    def split(self, text: str) -> SplitSolution:
        return self.kind.split(text, self.argument)

    def __str__(self) -> str:
        return self.value


def parse_step_rule(value: str) -> StepRule:
    """The rule ``value`` names, or StepRuleError saying why it cannot be used."""
    kind = _NAMES.get(value)
    if kind is not None and kind.check_argument is None:
        return StepRule(kind, "", value)
    name, colon, argument = value.partition(":")
    kind = _NAMES.get(name) if colon else None
    if kind is None or kind.check_argument is None:
        raise StepRuleError(f"unknown step rule {value!r}; expected one of {', '.join(PLAIN_RULES)} "
                            f"or {REGEX_PREFIX}PATTERN")
    kind.check_argument(argument)
    return StepRule(kind, argument, value)


def refusal(value: str) -> str | None:
    """Why a stored rule can no longer be used (one saved before the engine refused it), or None."""
    try:
        parse_step_rule(value)
    except StepRuleError as error:
        return str(error)
    return None


def step_rule_argument(value: str) -> str:
    """A command line's ``type=`` for a step rule: argparse shows the registry's reason for a refusal."""
    try:
        parse_step_rule(value)
    except StepRuleError as error:
        raise ArgumentTypeError(str(error)) from None
    return value


__all__ = ["ANSWER_HEADER", "MAX_RULE_CHARS", "PLAIN_RULES", "REGEX_PREFIX", "RULES", "STEP_RULE_DETAIL",
           "STEP_RULE_HELP", "RuleKind", "SplitSolution", "StepRule", "StepRuleError", "parse_step_rule",
           "refusal", "step_rule_argument"]

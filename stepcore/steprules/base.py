"""What a step rule is: a named way of cutting a response into steps, with an optional argument (a pattern).

Plain Python (no Django): the sampler splits with the same rules as the importers.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..grading import extract_boxed

ANSWER_HEADER = re.compile(r"^#\s*Answer\s*:?\s*(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class SplitSolution:
    steps: list[str]
    final_answer: str | None


class StepRuleError(ValueError):
    """A step rule that cannot be used; the message names the rule and says why."""


@dataclass(frozen=True)
class RuleKind:
    """One kind of step rule, as its module declares it."""

    #: the name a campaign stores (``regex`` is written ``regex:PATTERN``)
    name: str
    #: what it does, in a few words (help texts are built from these)
    help: str
    #: cuts ``text`` given the rule's argument ("" for a rule without one)
    split: Callable[[str, str], SplitSolution]
    #: other names that mean the same rule
    aliases: tuple[str, ...] = ()
    #: refuses a bad argument (StepRuleError); None: the rule takes no argument
    check_argument: Callable[[str], None] | None = None


def boxed_answer(text: str) -> str | None:
    return extract_boxed(text)

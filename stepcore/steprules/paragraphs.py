"""``paragraphs`` (also ``paragraph``): one step per blank-line-separated paragraph (model outputs that wrap
display math over several lines); the final answer is the last ``\\boxed{…}``."""
from __future__ import annotations

import re

from .base import RuleKind, SplitSolution, boxed_answer

_BLANK_LINE = re.compile(r"\n\s*\n")


def split_paragraphs(text: str, argument: str = "") -> SplitSolution:
    steps = [part.strip() for part in _BLANK_LINE.split(text) if part.strip()]
    return SplitSolution(steps, boxed_answer(text))


RULE = RuleKind(name="paragraphs", aliases=("paragraph",), split=split_paragraphs,
                help="one step per blank-line-separated paragraph")

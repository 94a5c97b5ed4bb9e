"""``auto`` (the default): ``lines`` when the text has a ``# Answer`` line, else ``paragraphs``."""
from __future__ import annotations

from .base import ANSWER_HEADER, RuleKind, SplitSolution
from .lines import split_lines
from .paragraphs import split_paragraphs


def split_auto(text: str, argument: str = "") -> SplitSolution:
    if any(ANSWER_HEADER.match(line.strip()) for line in text.splitlines()):
        return split_lines(text)
    return split_paragraphs(text)


RULE = RuleKind(name="auto", split=split_auto,
                help="lines when the text has a “# Answer” line, else paragraphs")

"""``sentence``: one step per sentence (prose answers in law, medicine, philosophy: one paragraph of reasoning
holds several claims to rate); a line break also ends a step, and common abbreviations ("e.g.", "Dr.", "U.S.")
and decimals do not."""
from __future__ import annotations

import re

from .base import RuleKind, SplitSolution, boxed_answer

# A sentence ends at . ! or ? (and a closing quote or bracket) followed by space; not after a short abbreviation
# or an initial ("e.g.", "Dr.", "U.S.", "J. Smith"), which look like sentence ends to a plain rule.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_NOT_AN_END = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|al|Dr|Mr|Mrs|Ms|Prof|St|No|Art|Sec|Inc|Ltd|Co|Jr|Sr|U\.S|"
                         r"U\.K|approx|Fig|Eq|p)\.|\b[A-Z]\.)$")
# the longest abbreviation above ("approx.") and the character before it: a longer tail changes no answer, and
# reading only the tail keeps a run of abbreviations linear
_TAIL = 10


def split_sentences(text: str, argument: str = "") -> SplitSolution:
    steps: list[str] = []
    for line in text.splitlines():
        # the pending sentence as pieces and its last characters: joining it again at every piece would be quadratic
        pending: list[str] = []
        tail = ""
        position = 0
        for match in _SENTENCE_END.finditer(line):
            piece = (line[position:match.start()] + line[match.start():match.end()].rstrip()).strip()
            position = match.end()
            pending.append(piece)
            tail = f"{tail} {piece}"[-_TAIL:] if tail else piece[-_TAIL:]
            if not _NOT_AN_END.search(tail):
                steps.append(" ".join(pending))
                pending, tail = [], ""
        rest = " ".join([*pending, line[position:].strip()]).strip()
        if rest:
            steps.append(rest)
    return SplitSolution(steps, boxed_answer(text))


RULE = RuleKind(name="sentence", split=split_sentences, help="one step per sentence")

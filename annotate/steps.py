"""How a solution text becomes steps.

The rule (documented in the README):

* ``lines`` — PRM800K's convention: one step per non-empty line; a line starting with ``# Answer``
  opens the final block, which becomes one last step ``"# Answer\\n\\n<answer>"``, and ``<answer>`` is
  the solution's final answer.
* ``paragraphs`` — one step per blank-line-separated paragraph (model outputs that wrap display math
  over several lines); the final answer is the last ``\\boxed{…}``.
* ``auto`` (default) — ``lines`` when the text has a ``# Answer`` line, else ``paragraphs``.
* ``newline`` and ``paragraph`` — the campaign settings' names of ``lines`` and ``paragraphs``.
* ``sentence`` — one step per sentence (prose answers in law, medicine, philosophy: one paragraph of
  reasoning holds several claims to rate); a line break also ends a step, and common abbreviations
  ("e.g.", "Dr.", "U.S.") and decimals do not.
* ``regex:PATTERN`` — the text is cut wherever ``PATTERN`` matches (the separator is dropped).

A campaign names its rule (``Campaign.step_rule``); the final answer found here is the math convention's (``#
Answer`` or the last ``\\boxed{}``): other domains read it with their grader (``annotate.graders``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .grading import extract_boxed

ANSWER_HEADER = re.compile(r"^#\s*Answer\s*:?\s*(.*)$", re.IGNORECASE)
SPLIT_RULES = ("auto", "lines", "paragraphs", "newline", "paragraph", "sentence")
REGEX_PREFIX = "regex:"
MAX_RULE_CHARS = 200
_ALIASES = {"newline": "lines", "paragraph": "paragraphs"}
# A sentence ends at . ! or ? (and a closing quote or bracket) followed by space; not after a short abbreviation
# or an initial ("e.g.", "Dr.", "U.S.", "J. Smith"), which look like sentence ends to a plain rule.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_NOT_AN_END = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|al|Dr|Mr|Mrs|Ms|Prof|St|No|Art|Sec|Inc|Ltd|Co|Jr|Sr|U\.S|"
                         r"U\.K|approx|Fig|Eq|p)\.|\b[A-Z]\.)$")


@dataclass(frozen=True)
class SplitSolution:
    steps: list[str]
    final_answer: str | None


def _split_lines(text: str) -> SplitSolution:
    steps: list[str] = []
    lines = text.splitlines()
    for position, raw in enumerate(lines):
        line = raw.strip()
        header = ANSWER_HEADER.match(line)
        if header:
            rest = [header.group(1).strip()] + [item.strip() for item in lines[position + 1 :]]
            answer = "\n".join(item for item in rest if item) or None
            steps.append(f"# Answer\n\n{answer}" if answer else "# Answer")
            return SplitSolution(steps, answer)
        if line:
            steps.append(line)
    return SplitSolution(steps, extract_boxed(text))


def _split_paragraphs(text: str) -> SplitSolution:
    steps = [part.strip() for part in re.split(r"\n\s*\n", text) if part.strip()]
    return SplitSolution(steps, extract_boxed(text))


def _split_sentences(text: str) -> SplitSolution:
    steps: list[str] = []
    for line in text.splitlines():
        pending = ""
        position = 0
        for match in _SENTENCE_END.finditer(line):
            piece = line[position:match.start()] + line[match.start():match.end()].rstrip()
            position = match.end()
            pending = f"{pending} {piece}".strip() if pending else piece.strip()
            if not _NOT_AN_END.search(pending):
                steps.append(pending)
                pending = ""
        rest = f"{pending} {line[position:].strip()}".strip()
        if rest:
            steps.append(rest)
    return SplitSolution(steps, extract_boxed(text))


def _split_regex(text: str, pattern: str) -> SplitSolution:
    parts = re.split(pattern, text)
    # groups in the pattern would put the separators among the parts: keep only the text between matches
    groups = re.compile(pattern).groups
    texts = parts[::groups + 1] if groups else parts
    return SplitSolution([part.strip() for part in texts if part and part.strip()], extract_boxed(text))


def check_step_rule(rule: str) -> str:
    """``rule`` when it names a step rule (one of ``SPLIT_RULES`` or ``regex:PATTERN`` with a valid pattern that
    cannot match the empty string), else ValueError saying why."""
    if rule in SPLIT_RULES:
        return rule
    if not rule.startswith(REGEX_PREFIX):
        raise ValueError(f"unknown step rule {rule!r}; expected one of {', '.join(SPLIT_RULES)} or regex:PATTERN")
    pattern = rule[len(REGEX_PREFIX):]
    if not pattern or len(rule) > MAX_RULE_CHARS:
        raise ValueError(f"a regex step rule needs a pattern of 1 to {MAX_RULE_CHARS - len(REGEX_PREFIX)} characters")
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ValueError(f"step rule {rule!r}: not a valid regular expression ({error})") from None
    if compiled.fullmatch(""):
        raise ValueError(f"step rule {rule!r}: the pattern matches the empty string, so it would cut everywhere")
    return rule


def split_solution(text: str, rule: str = "auto") -> SplitSolution:
    rule = _ALIASES.get(check_step_rule(rule), rule)
    if rule.startswith(REGEX_PREFIX):
        return _split_regex(text, rule[len(REGEX_PREFIX):])
    if rule == "sentence":
        return _split_sentences(text)
    if rule == "lines" or (rule == "auto" and any(ANSWER_HEADER.match(line.strip()) for line in text.splitlines())):
        return _split_lines(text)
    return _split_paragraphs(text)


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

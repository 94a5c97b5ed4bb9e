"""How a solution text becomes steps.

The rule (documented in the README):

* ``lines`` — PRM800K's convention: one step per non-empty line; a line starting with ``# Answer``
  opens the final block, which becomes one last step ``"# Answer\\n\\n<answer>"``, and ``<answer>`` is
  the solution's final answer.
* ``paragraphs`` — one step per blank-line-separated paragraph (model outputs that wrap display math
  over several lines); the final answer is the last ``\\boxed{…}``.
* ``auto`` (default) — ``lines`` when the text has a ``# Answer`` line, else ``paragraphs``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .grading import extract_boxed

ANSWER_HEADER = re.compile(r"^#\s*Answer\s*:?\s*(.*)$", re.IGNORECASE)
SPLIT_RULES = ("auto", "lines", "paragraphs")


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


def split_solution(text: str, rule: str = "auto") -> SplitSolution:
    if rule not in SPLIT_RULES:
        raise ValueError(f"unknown split rule {rule!r}; expected one of {', '.join(SPLIT_RULES)}")
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

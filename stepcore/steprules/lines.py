"""``lines`` (also ``newline``): PRM800K's convention, one step per non-empty line; a line starting with
``# Answer`` opens the final block, which becomes one last step ``"# Answer\\n\\n<answer>"``."""
from __future__ import annotations

from .base import ANSWER_HEADER, RuleKind, SplitSolution, boxed_answer


def split_lines(text: str, argument: str = "") -> SplitSolution:
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
    return SplitSolution(steps, boxed_answer(text))


RULE = RuleKind(name="lines", aliases=("newline",), split=split_lines,
                help="one step per line, PRM800K's “# Answer” block last")

"""Regular expression: the problem's ground truth is a pattern the final answer must match in full (case
ignored, a closing period left out).

Optional ``config["pattern"]`` reads the final answer out of the response instead of its last line (the last
match; its first group when it has one). Patterns come from admins' files, so a bad one grades nothing rather
than failing an import. Both run on RE2 (``stepcore.patterns``), in time linear in the answer: RE2 syntax, no
backreferences or lookaround; a config pattern RE2 refuses is refused when the campaign's settings are saved.
"""
from __future__ import annotations

from ..patterns import Pattern, PatternError, compile_pattern
from .base import MAX_ANSWER_CHARS, Grader, GraderConfigError


def _compiled(pattern: str) -> Pattern | None:
    try:
        return compile_pattern(pattern, ignore_case=True)
    except PatternError:
        return None


class RegexGrader(Grader):
    name = "regex"
    label = "Regular expression (the ground truth is a pattern the final answer matches in full)"

    def __init__(self, config: dict[str, object] | None = None) -> None:
        super().__init__(config)
        pattern = self.config.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise GraderConfigError("pattern", f"is not a valid regular expression: {pattern!r}")
        if pattern is not None:
            try:
                compile_pattern(pattern, ignore_case=True)
            except PatternError as error:
                raise GraderConfigError("pattern", f"{pattern!r} is {error}") from None

    def extract(self, text: str, steps: list[str] | None = None, options: list[str] | None = None) -> str | None:
        pattern = self.config.get("pattern")
        if not isinstance(pattern, str):
            return super().extract(text, steps, options)
        compiled = _compiled(pattern)
        matches = list(compiled.finditer(text)) if compiled is not None else []
        if not matches:
            return None
        last = matches[-1]
        return (last.group(1) if compiled is not None and compiled.groups else last.group(0)).strip() or None

    def grade(self, ground_truth: str | None, answer: str | None) -> bool | None:
        if ground_truth is None or answer is None or not ground_truth.strip() or not answer.strip():
            return None
        compiled = _compiled(ground_truth.strip())
        if compiled is None or len(answer) > MAX_ANSWER_CHARS:
            return False
        # a sentence's closing period is not part of the answer (as the exact grader ignores it)
        return compiled.fullmatch(answer.strip().removesuffix(".").strip()) is not None

"""The one engine for patterns that people supply (step rules, the regex grader, pool uploads): RE2.

RE2 matches in time linear in the text whatever the pattern, so a pattern like ``(a+)+$`` cannot hold a request
or a worker. It has no backreferences and no lookaround; a pattern that needs them is refused with RE2's reason
when it is saved. Our own fixed patterns stay on Python's ``re``.

Plain Python: Django-free code (the sampler, the training node) may import it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

#: what a compiled pattern is (re2 ships no type information)
Pattern = Any


class PatternError(ValueError):
    """A pattern the engine refuses; the message says why."""


def _options(*, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # the refusal is raised with its reason; RE2 need not print it to stderr too
    options.case_sensitive = not ignore_case
    return options


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str, *, ignore_case: bool = False) -> Pattern:
    """``pattern`` compiled by RE2; PatternError naming RE2's reason when it cannot take it."""
    try:
        return re2.compile(pattern, _options(ignore_case=ignore_case))
    except re2.error as error:
        reason = error.args[0] if error.args else "refused"
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise PatternError(f"not a valid pattern for the linear-time engine RE2 ({reason})") from None

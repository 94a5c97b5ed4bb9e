"""What a job page shows of a process's output: the failure in one sentence, a log without terminal noise.

The stored ``error`` and ``log_tail`` keep everything (staff see it behind a "details" toggle); these
functions only make the readable versions.
"""
from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
STDERR_MARK = "--- stderr (tail) ---"
# Python's exception lines ("ValueError: …") as the last resort when a process printed no "error: " line.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*)(?:Error|Exception|Interrupt|Exit): (.+)$")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def _is_report_line(line: str) -> bool:
    stripped = line.strip()
    return (not stripped or " | " in line or set(stripped) <= set("-+") or stripped == "Notes:"
            or stripped.startswith("- "))


def clean_log(text: str) -> str:
    """The log without ANSI escape codes and without transformers' "LOAD REPORT" tables (a weight-loading
    diagnostic every fine-tuning of a base model prints: the new head's keys are always "missing")."""
    out: list[str] = []
    skipping = False
    for line in strip_ansi(text).splitlines():
        if "LOAD REPORT" in line:
            skipping = True
            out.append("(model loading report hidden)")
            continue
        if skipping and _is_report_line(line):
            continue
        skipping = False
        out.append(line.rstrip())
    return "\n".join(out)


def failure_summary(error: str) -> str:
    """One sentence: the process's own ``error: …`` line when it printed one, else the watcher's reason."""
    if not error.strip():
        return ""
    text = strip_ansi(error)
    reason, _, stderr = text.partition(STDERR_MARK)
    reason = reason.strip().splitlines()[0] if reason.strip() else ""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    message = next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")), None)
    if message is None:
        message = next((m.group(1) for line in reversed(lines) if (m := EXCEPTION_LINE.match(line))), None)
    if message is None:
        return reason
    return f"{message} ({reason})" if reason else message

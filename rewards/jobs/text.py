"""What a job page shows of a process's output: the failure in one sentence, a log without terminal noise, no
server folders.

The stored ``error`` and ``log_tail`` keep everything (staff see it behind a "details" toggle); these
functions only make the readable versions.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings

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
    return without_server_paths("\n".join(out))


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
        return without_server_paths(reason)
    return without_server_paths(f"{message} ({reason})" if reason else message)


def _server_roots() -> list[str]:
    """The folders the server keeps its files in, as written and as resolved, the longest (innermost) first."""
    roots = (settings.STEPLAB_JOBS_ROOT, settings.STEPLAB_MODELS_DIR, settings.MEDIA_ROOT, settings.VAR_DIR,
             settings.BASE_DIR)
    return sorted({str(folder).rstrip("/") + "/" for root in roots for folder in (Path(root), Path(root).resolve())},
                  key=len, reverse=True)


def without_server_paths(text: str) -> str:
    """``text`` with the server's folders taken off every path in it: ``/srv/steplab/var/jobs/train-7/model``
    reads ``train-7/model``. Users see what a thing is called, never where this server keeps it."""
    for root in _server_roots():
        text = text.replace(root, "")
    return text


def shown(value: Any) -> Any:
    """A serialized answer (dicts, lists, strings) with ``without_server_paths`` applied to every string."""
    if isinstance(value, str):
        return without_server_paths(value)
    if isinstance(value, dict):
        return {key: shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown(item) for item in value]
    return value

"""Shared machinery of every importer: line reading, row errors, reports (the bulk writes: ``steplab.bulk``).

Every importer validates the *whole* file first (streaming, keeping only the errors), then imports in
one transaction, so a bad line imports nothing unless ``skip_invalid`` asks to import the rest.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from steplab import jsonlimits
from steplab.bulk import ProgressCallback

MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_REPORTED_ERRORS = 1000


class RowError(Exception):
    """A row that cannot be imported; ``field`` is a dotted path such as ``label.steps[2].rating``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"field '{field}': {message}" if field else message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class RejectedLine:
    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where}: field '{self.field}': {self.message}" if self.field else f"{where}: {self.message}"


@dataclass
class ImportReport:
    file: str
    lines: int = 0
    imported: int = 0
    rejected: list[RejectedLine] = field(default_factory=list)
    rejected_count: int = 0
    created: dict[str, int] = field(default_factory=dict)

    def reject(self, line: int, error: RowError) -> None:
        self.rejected_count += 1
        if len(self.rejected) < MAX_REPORTED_ERRORS:
            self.rejected.append(RejectedLine(self.file, line, error.field, error.message))

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "lines": self.lines,
            "imported": self.imported,
            "rejected_count": self.rejected_count,
            "rejected": [vars(item) for item in self.rejected],
            "created": self.created,
        }


class ImportFailed(Exception):
    """Raised when a file has invalid lines and ``skip_invalid`` is off: nothing was imported."""

    def __init__(self, report: ImportReport) -> None:
        first = "; ".join(str(item) for item in report.rejected[:5])
        super().__init__(f"{report.rejected_count} invalid line(s) in {report.file}, nothing imported: {first}")
        self.report = report


_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")


def _unstorable_text(value: Any) -> str | None:
    """'a NUL character' / 'a lone surrogate' when any string (key or value) inside ``value`` has one."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "a NUL character (\\u0000)"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a lone UTF-16 surrogate"
    return None


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed JSON or RowError) for each non-blank line, streaming."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if len(raw) > MAX_LINE_BYTES:
                yield number, RowError("", f"line is longer than {MAX_LINE_BYTES} bytes")
                continue
            if not raw.strip():
                continue
            try:
                value = jsonlimits.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                yield number, RowError("", f"not valid JSON ({error})")
                continue
            except jsonlimits.JSONTooDeep as error:
                yield number, RowError("", f"not usable JSON ({error})")
                continue
            except jsonlimits.NumberOutOfRange as error:
                yield number, RowError(error.field, error.reason)
                continue
            # JSON escapes can spell what PostgreSQL text cannot hold (NUL, a lone UTF-16 surrogate): look closer
            # only when the line has such an escape (valid surrogate pairs, e.g. emoji, have one too).
            if _SUSPECT_ESCAPE.search(raw) and (bad := _unstorable_text(value)) is not None:
                yield number, RowError("", f"holds {bad}, which no text column can store")
                continue
            yield number, value


T = TypeVar("T")

# How often an importer calls its ProgressCallback (steplab.bulk), in lines.
PROGRESS_EVERY = 500


def validate_file(path: Path, parse: Callable[[Any], T], report: ImportReport,
                  progress: ProgressCallback | None = None) -> int:
    """First pass: count lines and collect errors without keeping rows in memory."""
    valid = 0
    for number, value in iter_json_lines(path):
        if progress is not None and number % PROGRESS_EVERY == 0:
            progress("validate", number)
        report.lines += 1
        if isinstance(value, RowError):
            report.reject(number, value)
            continue
        try:
            parse(value)
        except RowError as error:
            report.reject(number, error)
        else:
            valid += 1
    return valid


def valid_rows(path: Path, parse: Callable[[Any], T], batch_size: int, progress: ProgressCallback | None = None,
               phase: str = "import", report: ImportReport | None = None) -> Iterator[list[tuple[int, T]]]:
    """Parsed valid rows in batches: the second pass after ``validate_file``, or — given ``report`` — the only
    pass, which also counts the lines and records every rejection."""
    batch: list[tuple[int, T]] = []
    for number, value in iter_json_lines(path):
        if progress is not None and number % PROGRESS_EVERY == 0:
            progress(phase, number)
        if report is not None:
            report.lines += 1
        if isinstance(value, RowError):
            if report is not None:
                report.reject(number, value)
            continue
        try:
            parsed = parse(value)
        except RowError as error:
            if report is not None:
                report.reject(number, error)
            continue
        batch.append((number, parsed))
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch

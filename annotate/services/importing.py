"""Shared machinery of every importer: line reading, row errors, reports, fast bulk inserts.

Every importer validates the *whole* file first (streaming, keeping only the errors), then imports in
one transaction, so a bad line imports nothing unless ``skip_invalid`` asks to import the rest.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from django.db import connection, models
from django.utils import timezone

from steplab import jsonlimits

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
                yield number, jsonlimits.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                yield number, RowError("", f"not valid JSON ({error})")
            except jsonlimits.JSONTooDeep as error:
                yield number, RowError("", f"not usable JSON ({error})")


T = TypeVar("T")

# Optional progress hook of every importer: called with (phase, line number) every PROGRESS_EVERY lines;
# phases are "validate" (first pass), "check" (solutions: problem lookups) and "import" (the writing pass).
ProgressCallback = Callable[[str, int], None]
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


M = TypeVar("M", bound=models.Model)


def allocate_ids(model: type[models.Model], count: int) -> list[int]:
    """Primary keys for ``count`` new rows, taken from the table's sequence (PostgreSQL only)."""
    if count == 0:
        return []
    table = model._meta.db_table
    pk_column = model._meta.pk.column  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)", [table, pk_column, count]
        )
        return [row[0] for row in cursor.fetchall()]


def _db_value(model_field: models.Field, value: Any) -> Any:
    if isinstance(model_field, models.JSONField):
        return None if value is None else json.dumps(value)
    return value


def bulk_insert(objects: list[M]) -> list[M]:
    """Insert model instances fast, setting their primary keys.

    PostgreSQL: ids from the sequence, then one COPY (an order of magnitude faster than INSERT).
    Elsewhere: ``bulk_create``, which returns primary keys on SQLite and PostgreSQL alike.
    """
    if not objects:
        return objects
    model = type(objects[0])
    if connection.vendor != "postgresql":
        return model.objects.bulk_create(objects, batch_size=500)  # type: ignore[attr-defined]
    for obj, pk in zip(objects, allocate_ids(model, len(objects)), strict=True):
        obj.pk = pk
    concrete = [f for f in model._meta.concrete_fields]
    for obj in objects:
        for model_field in concrete:
            if getattr(model_field, "auto_now", False) or getattr(model_field, "auto_now_add", False):
                if getattr(obj, model_field.attname) is None:
                    model_field.pre_save(obj, add=True)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in concrete)
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        raw_cursor = cursor.cursor
        with raw_cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for obj in objects:
                copy.write_row([_db_value(f, getattr(obj, f.attname)) for f in concrete])
    return objects


def insert_rows(model: type[models.Model], fields: list[str], rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert plain value tuples — no model instances, which cost more than the COPY itself on the big tables
    (steps, completions, ratings) — and return the new primary keys in order.

    ``fields`` are attnames (``solution_id``); other concrete fields get their default, timestamps "now".
    """
    if not rows:
        return []
    meta = model._meta
    by_attname = {f.attname: f for f in meta.concrete_fields}
    unknown = [name for name in fields if name not in by_attname]
    if unknown:
        raise ValueError(f"{meta.label} has no field {unknown[0]!r}")
    if connection.vendor != "postgresql":
        objects = [model(**dict(zip(fields, row, strict=True))) for row in rows]
        model.objects.bulk_create(objects, batch_size=500)  # type: ignore[attr-defined]
        return [obj.pk for obj in objects]
    now = timezone.now()
    pk = meta.pk
    rest = [f for f in meta.concrete_fields if f is not pk and f.attname not in fields]
    filler = tuple(now if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
                   else _db_value(f, f.get_default()) for f in rest)
    json_positions = [i for i, name in enumerate(fields) if isinstance(by_attname[name], models.JSONField)]
    ids = allocate_ids(model, len(rows))
    columns = ", ".join(connection.ops.quote_name(f.column)
                        for f in [pk, *(by_attname[name] for name in fields), *rest])  # type: ignore[list-item]
    table = connection.ops.quote_name(meta.db_table)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for new_id, row in zip(ids, rows, strict=True):
                if json_positions:
                    row = tuple(json.dumps(v) if i in json_positions and v is not None else v
                                for i, v in enumerate(row))
                copy.write_row((new_id, *row, *filler))
    return ids


def select_by_ids(model: type[models.Model], columns: list[str], key: str, ids: Iterable[int],
                  order_by: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """``SELECT columns FROM model WHERE key = ANY(ids)`` as plain tuples (JSON columns decoded).

    The exports read every step, completion and rating of a chunk of solutions. Through the ORM an
    ``IN (...)`` of 10,000 ids cost more than the query itself (Django builds one parameter per id and
    psycopg re-parses the long SQL: 25 ms per chunk measured); one array parameter does not. ``columns`` and
    ``key`` are attnames (``step_id``). Other databases (the embedded SQLite) go through the ORM.
    """
    ids = list(ids)
    if not ids:
        return []
    if connection.vendor != "postgresql":
        return list(model.objects.filter(**{f"{key}__in": ids}).order_by(*order_by).values_list(*columns))
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in columns]
    select = ", ".join(quote(f.column) for f in fields)
    order = ", ".join(quote(meta.get_field(name).column) for name in order_by)
    sql = (f"SELECT {select} FROM {quote(meta.db_table)} WHERE {quote(meta.get_field(key).column)} "
           f"= ANY(%s::bigint[])" + (f" ORDER BY {order}" if order else ""))
    with connection.cursor() as cursor:
        cursor.execute(sql, ["{" + ",".join(map(str, ids)) + "}"])  # one text literal: cheaper than a list dump
        rows = cursor.fetchall()
    for position in (i for i, f in enumerate(fields) if isinstance(f, models.JSONField)):
        rows = [row if not isinstance(row[position], str)
                else (*row[:position], json.loads(row[position]), *row[position + 1:]) for row in rows]
    return rows


def refresh_planner_statistics(*model_classes: type[models.Model]) -> None:
    """ANALYZE the tables a bulk import filled. Without fresh statistics PostgreSQL plans the next queries for
    the old (often empty) tables and picks sequential scans: measured, an export after a 1M-rating import ran
    200x slower per chunk until autovacuum caught up."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in model_classes:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch

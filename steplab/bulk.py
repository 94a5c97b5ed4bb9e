"""Bulk database writes and reads of both apps: ids from the sequence, COPY inserts, reads by id arrays.

The importers (``annotate.services.importing`` and the ones built on it), the dataset exports, the candidate
pools and the benchmarks all write and read many rows at once through these; PostgreSQL gets ``COPY`` and
array parameters, the embedded SQLite the plain ORM. ``import_transaction`` and ``fewer_collections`` frame a
whole import; ``read_ahead`` overlaps parsing with the database's writing.

Why one module of ~600 lines: the COPY writer, its per-type converters and the reads by id arrays share the
column and type helpers (``_column``, ``_kind``, the per-vendor paths); apart, those would become public API.
"""
from __future__ import annotations

import gc
import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from functools import partial
from itertools import pairwise
from operator import attrgetter
from typing import Any, TypeVar

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

T = TypeVar("T")

# Optional progress hook of every importer: called with (phase, line number) every few hundred lines;
# phases are "validate" (first pass), "check" (solutions: problem lookups) and "import" (the writing pass).
ProgressCallback = Callable[[str, int], None]


def read_ahead(produce: Callable[[ProgressCallback | None], Iterator[T]], progress: ProgressCallback | None,
               depth: int = 2) -> Iterator[T]:
    """The batches of ``produce(progress)``, made by a background thread up to ``depth`` ahead of the consumer.

    An import alternates between parsing (Python, this process) and writing (the database server, which the
    process waits for): reading ahead lets the next batch be parsed while the server takes in the last one — a
    thread waiting on the database releases the GIL. The thread runs on its own database connection, outside the
    import's transaction: ``produce`` may only take ids from a PostgreSQL sequence there (``allocate_ids``:
    sequences hand out ids outside any transaction), nothing else — every other database call, ``progress``
    included (it is relayed), stays in the caller's thread. An exception in the thread is raised here; leaving
    early stops the thread.
    """
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def send(kind: str, value: Any) -> None:
        while not stop.is_set():
            try:
                handoff.put((kind, value), timeout=0.1)
                return
            except queue.Full:
                continue

    def relay(phase: str, line: int) -> None:
        send("progress", (phase, line))

    def run() -> None:
        try:
            for item in produce(relay if progress is not None else None):
                send("item", item)
                if stop.is_set():
                    return
            send("end", None)
        except BaseException as error:  # noqa: BLE001 — handed to the consumer, which raises it
            send("error", error)
        finally:
            connection.close()  # this thread's own, if it opened one

    thread = threading.Thread(target=run, name="import-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = handoff.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            if kind == "progress":
                # a "progress" message carries the callback's arguments as a tuple
                progress(*value)  # type: ignore[misc]
                continue
            yield value
    finally:
        stop.set()
        thread.join()


M = TypeVar("M", bound=models.Model)

# Column types whose Python values the drivers take as they are (psycopg's COPY and sqlite3 alike).
_PLAIN_TYPES = frozenset({
    "AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField", "SmallIntegerField",
    "PositiveIntegerField", "PositiveBigIntegerField", "PositiveSmallIntegerField", "BooleanField", "CharField",
    "TextField", "SlugField", "FloatField",
})


def allocate_ids(model: type[models.Model], count: int) -> list[int]:
    """Primary keys for ``count`` new rows.

    PostgreSQL: from the table's sequence, returned as one text value (1M ids fetched as 1M result rows cost
    11 s of the 1M-rating import; as one string, under a second); any connection may take them, in any thread,
    inside a transaction or not: a sequence never hands a value out twice. SQLite: the next ``count`` ids after the
    table's highest (and its AUTOINCREMENT high-water mark), under the database's write lock, which the caller's
    transaction then keeps until it ends — so no other connection can take them (call it inside a transaction).
    """
    if count == 0:
        return []
    table = model._meta.db_table
    pk_column = _column(model._meta.pk)
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # A deferred transaction takes the write lock at its first write: take it before reading the last id.
            cursor.execute(f"UPDATE {quote(table)} SET {quote(pk_column)} = {quote(pk_column)} WHERE 0")
            cursor.execute(f"SELECT max(coalesce((SELECT max({quote(pk_column)}) FROM {quote(table)}), 0), "
                           "coalesce((SELECT seq FROM sqlite_sequence WHERE name = %s), 0))", [table])
            last = cursor.fetchone()[0]
            return list(range(last + 1, last + count + 1))
        # The sequence's name first: pg_get_serial_sequence inside the nextval() ran once per id (5x slower).
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, pk_column])
        sequence = cursor.fetchone()[0]
        cursor.execute("SELECT string_agg(nextval(%s::regclass)::text, ',') FROM generate_series(1, %s)",
                       [sequence, count])
        return list(map(int, cursor.fetchone()[0].split(",")))


def _converters(columns: list[models.Field]) -> list[tuple[int, Callable[[Any], Any]]]:
    """(position, function) for the columns whose values need converting before they reach the driver."""
    converters: list[tuple[int, Callable[[Any], Any]]] = []
    for position, model_field in enumerate(columns):
        kind = _kind(model_field)
        if isinstance(model_field, models.JSONField):
            converters.append((position, _json_or_null))
        elif kind in _PLAIN_TYPES or (kind == "DateTimeField" and connection.vendor == "postgresql"):
            continue
        elif kind == "DateTimeField" and connection.vendor == "sqlite":
            # USE_TZ is on, so the connection's timezone is set.
            converters.append((position, partial(_sqlite_datetime, zone=connection.timezone)))  # type: ignore[arg-type]
        else:
            converters.append((position, partial(_prep_save, model_field)))
    return converters


def _sqlite_datetime(value: datetime | None, zone: tzinfo) -> str | None:
    """What Django's SQLite backend stores for a datetime (naive, in the connection's zone), at a fifth of the
    cost of ``get_db_prep_save`` (which was most of the time of writing 200,000 ratings)."""
    if value is None or value.utcoffset() is None:
        return None if value is None else str(value)
    return str(value.astimezone(zone).replace(tzinfo=None))


class JsonText(str):
    """A value already encoded as JSON, written as it is into a JSON column: an importer encodes its JSON values
    in its read-ahead thread, while the main thread waits on the server."""


def json_text(value: Any) -> JsonText | None:
    """``value`` encoded as a JSON column stores it (None stays NULL)."""
    return None if value is None else JsonText(json.dumps(value))


def _json_or_null(value: Any) -> str | None:
    return value if value is None or isinstance(value, JsonText) else json.dumps(value)


def _write(model: type[models.Model], columns: list[models.Field], rows: list[tuple[Any, ...]]) -> None:
    """Insert value tuples (primary key included) into ``columns`` of ``model``'s table."""
    if rows:
        write_prepared(_prepare_rows(model, columns, list(zip(*rows, strict=True))))


@dataclass
class PreparedRows:
    """Rows of one table ready to be written, made without the database — so in any thread: an import formats
    its largest tables in its read-ahead thread, while the server takes in the previous batch.

    PostgreSQL: the rows in COPY's text format, in slices, and the distinct values of each foreign key (checked
    in bulk when written). SQLite: the value tuples of one prepared INSERT."""

    model: type[models.Model]
    columns: list[models.Field]
    copy_slices: list[str] = field(default_factory=list)
    referenced: list[tuple[models.ForeignKey, set[Any]]] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def _prepare_rows(model: type[models.Model], columns: list[models.Field], by_column: list[Sequence[Any]],
                  tail: tuple[Any, ...] = ()) -> PreparedRows:
    """The rows given column by column (``by_column[i]`` holds every row's value of ``columns[i]``), ready for
    ``write_prepared``; ``tail`` holds the values of the last columns, the same for every row (defaults, "now"),
    converted once rather than per row.

    Values are converted and formatted a column at a time (one loop per column, ``map`` where no value needs a
    look): per-value function calls were the largest client cost of a 1M-rating import.
    """
    own = len(columns) - len(tail)
    tail_values = list(tail)
    for position, convert in _converters(columns[own:]):
        tail_values[position] = convert(tail_values[position])
    tail = tuple(tail_values)
    for position, convert in _converters(columns[:own]):
        by_column[position] = _convert_column(convert, by_column[position])
    prepared = PreparedRows(model=model, columns=columns)
    if connection.vendor != "postgresql":
        prepared.rows = ([(*row, *tail) for row in zip(*by_column, strict=True)] if tail
                         else list(zip(*by_column, strict=True)))
        return prepared
    # ForeignKey.db_constraint is a plain attribute that django-stubs does not declare.
    prepared.referenced = [
        (f, (set(by_column[position]) if position < own else {tail[position - own]}) - {None})
        for position, f in enumerate(columns) if isinstance(f, models.ForeignKey) and f.db_constraint]  # type: ignore[attr-defined]
    formats = [_COPY_FORMATS.get(_kind(f)) for f in columns]
    if None in formats:  # a column type without a text format below: psycopg formats the rows when written
        prepared.rows = [(*row, *tail) for row in zip(*by_column, strict=True)]
        return prepared
    # COPY's text format written here, the constant columns rendered once: 2.5x less CPU than psycopg's
    # write_row, which rendered the two "now" timestamps of every rating again.
    end = "".join(f"\t{_copy_text(formats[own + i], value)}" for i, value in enumerate(tail)) + "\n"
    text_formats = [fmt for fmt in formats[:own] if fmt is not None]  # all of them (checked above)
    # In slices: the server takes in each slice while the next one is sent.
    for start in range(0, len(by_column[0]), COPY_SLICE_ROWS):
        texts = [_copy_column(fmt, values[start:start + COPY_SLICE_ROWS])
                 for fmt, values in zip(text_formats, by_column, strict=True)]
        prepared.copy_slices.append(end.join(map("\t".join, zip(*texts, strict=True))) + end)
    return prepared


def write_prepared(prepared: PreparedRows) -> None:
    """Insert rows made by ``prepare_columns``. PostgreSQL: one ``COPY``, its foreign keys
    checked in bulk (see ``_foreign_keys_in_bulk``). SQLite: ``executemany`` of one prepared INSERT — the
    statement is compiled once, not once per 500 rows."""
    quote = connection.ops.quote_name
    table = quote(prepared.model._meta.db_table)
    names = ", ".join(quote(_column(f)) for f in prepared.columns)
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            placeholders = ", ".join(["%s"] * len(prepared.columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", prepared.rows)
            return
        with (_foreign_keys_in_bulk(cursor, prepared.referenced), connection.wrap_database_errors,
              cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy):
            for row in prepared.rows:
                copy.write_row(row)
            for text in prepared.copy_slices:
                copy.write(text)


# Rows per ``copy.write``: large enough that a write costs little, small enough that the server starts early.
COPY_SLICE_ROWS = 4096


def _convert_column(convert: Callable[[Any], Any], values: Sequence[Any]) -> list[Any]:
    """``convert`` applied to a column's values; a value object met twice (a constant ``provenance`` dict, an
    empty ``{}``) is converted once."""
    done: dict[int, Any] = {}
    converted = []
    for value in values:
        key = id(value)  # the column holds a reference to every value: ids are not reused while it lives
        if key not in done:
            done[key] = convert(value)
        converted.append(done[key])
    return converted


def _copy_column(format_value: Callable[[Any], str], values: Sequence[Any]) -> list[str]:
    """A column's values in COPY's text format."""
    if format_value is _copy_string:
        if not _needs_escapes(values):  # nearly always: each value as it is (translate cost 1 µs per value)
            return ["\\N" if value is None else value for value in values] if None in values else list(values)
        return ["\\N" if value is None else value.translate(_COPY_ESCAPES) for value in values]
    if None not in values:
        return list(map(format_value, values))
    return ["\\N" if value is None else format_value(value) for value in values]


def _needs_escapes(values: Sequence[str | None]) -> bool:
    """Whether any of the strings holds a character that COPY's text format escapes (one scan of them all)."""
    joined = "".join(filter(None, values))
    return "\\" in joined or "\n" in joined or "\t" in joined or "\r" in joined


def _column(field: Any) -> str:
    """A concrete field's column (Django's types also cover reverse relations and non-concrete fields, which have
    none)."""
    column = getattr(field, "column", None)
    if not isinstance(column, str):
        raise TypeError(f"{field!r} has no database column")
    return column


def _prep_save(model_field: models.Field, value: Any) -> Any:
    return model_field.get_db_prep_save(value, connection)


def _kind(model_field: models.Field) -> str:
    # A concrete relation is a ForeignKey (or OneToOneField): its column holds the target's type.
    return (model_field.target_field if isinstance(model_field, models.ForeignKey) else model_field).get_internal_type()


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _copy_string(value: Any) -> str:
    return value.translate(_COPY_ESCAPES)


def _copy_bool(value: Any) -> str:
    return "t" if value else "f"


def _copy_datetime(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


# How COPY's text format spells a value of each column type (None is \N for all).
_COPY_FORMATS: dict[str, Callable[[Any], str]] = {
    **{kind: str for kind in ("AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                              "SmallIntegerField", "PositiveIntegerField", "PositiveBigIntegerField",
                              "PositiveSmallIntegerField")},
    "FloatField": repr, "BooleanField": _copy_bool, "DateTimeField": _copy_datetime,
    **{kind: _copy_string for kind in ("CharField", "TextField", "SlugField", "JSONField")},
}


def _copy_text(format_value: Callable[[Any], str] | None, value: Any) -> str:
    # the caller checked that every column has a format (no None reaches here)
    return "\\N" if value is None else format_value(value)  # type: ignore[misc]


def _may_skip_row_triggers(cursor: Any) -> bool:
    """Whether this session may set ``session_replication_role`` (a superuser, or from PostgreSQL 15 a role
    given ``GRANT SET ON PARAMETER session_replication_role``)."""
    # only called on PostgreSQL, whose connection wrapper has pg_version
    if connection.pg_version >= 150000:  # type: ignore[attr-defined]
        cursor.execute("SELECT has_parameter_privilege('session_replication_role', 'SET')")
    else:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
    return bool(cursor.fetchone()[0])


@contextmanager
def _foreign_keys_in_bulk(cursor: Any, referenced: list[tuple[models.ForeignKey, set[Any]]]) -> Iterator[None]:
    """Check the foreign keys of rows about to be copied with one query per key instead of one per row.

    PostgreSQL checks a foreign key with a trigger per inserted row, at commit for Django's deferred keys:
    6 million lookups (21 s) after a 1M-rating import. Instead, each referenced table is asked once for all the
    distinct keys of the batch, which it locks ``FOR KEY SHARE`` as the row triggers would (so no other
    transaction can delete them before this one commits); then the COPY runs with
    ``session_replication_role = replica``, which leaves out the row triggers — for this transaction's own
    statements only, and only until the COPY ends. Unique and check constraints are indexes and expressions, not
    triggers: they stay checked. A role that may not set the parameter keeps the row triggers (correct, slower).
    """
    if not referenced or not connection.in_atomic_block or not _may_skip_row_triggers(cursor):
        yield
        return
    for key, values in referenced:
        _lock_referenced(cursor, key, values)
    cursor.execute("SELECT current_setting('session_replication_role')")
    previous = cursor.fetchone()[0]
    cursor.execute("SELECT set_config('session_replication_role', 'replica', true)")
    yield
    # Not in a ``finally``: after a failed COPY the transaction is aborted and its rollback restores the role.
    cursor.execute("SELECT set_config('session_replication_role', %s, true)", [previous])


def _lock_referenced(cursor: Any, key: models.ForeignKey, values: set[Any]) -> None:
    """Lock the referenced rows of one foreign key; IntegrityError (as PostgreSQL words it) if one is missing.

    The keys go as runs of consecutive integers (an import's are nearly all consecutive: 20,000 step ids are a
    few runs), each one index range scan rather than one index probe per key.
    """
    if not values:
        return
    quote = connection.ops.quote_name
    target = key.target_field
    table, column = quote(target.model._meta.db_table), quote(_column(target))
    kind = target.rel_db_type(connection)
    if set(map(type, values)) == {int}:
        starts, ends = _runs(sorted(values))
        rows = (f"SELECT {column} FROM unnest(%s::{kind}[], %s::{kind}[]) AS run(first, last) "
                f"JOIN {table} ON {column} BETWEEN run.first AND run.last")
        parameters: list[Any] = ["{" + ",".join(map(str, starts)) + "}", "{" + ",".join(map(str, ends)) + "}"]
    else:
        rows = f"SELECT {column} FROM {table} WHERE {column} = ANY(%s::{kind}[])"
        parameters = [list(values)]
    cursor.execute(f"SELECT count(*) FROM ({rows} FOR KEY SHARE OF {table}) AS locked", parameters)
    if cursor.fetchone()[0] == len(values):
        return
    cursor.execute(rows, parameters)
    missing = sorted(values - {row[0] for row in cursor.fetchall()}, key=str)
    raise IntegrityError(
        f'insert or update on table "{key.model._meta.db_table}" violates foreign key constraint on '
        f'"{key.column}": key ({key.column})=({missing[0]}) is not present in table "{target.model._meta.db_table}"'
        + (f" ({len(missing)} such keys)" if len(missing) > 1 else ""))


def _runs(ordered: list[int]) -> tuple[list[int], list[int]]:
    """First and last values of each run of consecutive integers in a sorted list."""
    if ordered[-1] - ordered[0] == len(ordered) - 1:  # one run, as a batch's new ids nearly always are
        return [ordered[0]], [ordered[-1]]
    starts, ends = [ordered[0]], []
    for previous, value in pairwise(ordered):
        if value != previous + 1:
            ends.append(previous)
            starts.append(value)
    ends.append(ordered[-1])
    return starts, ends


def bulk_insert(objects: list[M]) -> list[M]:
    """Insert model instances fast, setting their primary keys (ids allocated first, then one COPY on
    PostgreSQL, one prepared ``executemany`` on SQLite)."""
    if not objects:
        return objects
    model = type(objects[0])
    if connection.vendor not in ("postgresql", "sqlite"):
        return model._default_manager.bulk_create(objects, batch_size=500)
    concrete = list(model._meta.concrete_fields)
    stamped = [f for f in concrete if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)]
    get_values = attrgetter(*(f.attname for f in concrete)) if len(concrete) > 1 else (
        lambda obj: (getattr(obj, concrete[0].attname),))
    with transaction.atomic(savepoint=False):  # SQLite: the ids' write lock lasts until the rows are in
        for obj, pk in zip(objects, allocate_ids(model, len(objects)), strict=True):
            obj.pk = pk
            for model_field in stamped:
                if getattr(obj, model_field.attname) is None:
                    model_field.pre_save(obj, add=True)
        _write(model, concrete, [get_values(obj) for obj in objects])
    for obj in objects:
        obj._state.adding, obj._state.db = False, connection.alias
    return objects


def insert_rows(model: type[models.Model], fields: list[str], rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert plain value tuples — no model instances, which cost more than the COPY itself on the big tables
    (steps, completions, ratings) — and return the new primary keys in order.

    ``fields`` are attnames (``solution_id``); other concrete fields get their default, timestamps "now".
    """
    if not rows:
        return []
    return insert_columns(model, fields, list(zip(*rows, strict=True)))


def insert_columns(model: type[models.Model], fields: list[str], columns: list[Sequence[Any]]) -> list[int]:
    """``insert_rows`` of values given column by column (``columns[i]`` holds every row's ``fields[i]``): a bulk
    import builds its largest tables this way, without a tuple per row to take apart again."""
    count = _checked_count(model, fields, columns)
    if count == 0:
        return []
    if connection.vendor not in ("postgresql", "sqlite"):
        objects = [model(**dict(zip(fields, row, strict=True))) for row in zip(*columns, strict=True)]
        model._default_manager.bulk_create(objects, batch_size=500)
        return [obj.pk for obj in objects]
    with transaction.atomic(savepoint=False):  # SQLite: the ids' write lock lasts until the rows are in
        ids = allocate_ids(model, count)
        write_prepared(prepare_columns(model, fields, columns, ids=ids))
    return ids


def prepare_columns(model: type[models.Model], fields: list[str], columns: list[Sequence[Any]], *,
                    ids: list[int]) -> PreparedRows:
    """``insert_columns``' rows with their primary keys ``ids`` (from ``allocate_ids``), ready for
    ``write_prepared`` and made without the database: PostgreSQL or SQLite only."""
    if len(ids) != _checked_count(model, fields, columns):
        raise ValueError(f"{len(ids)} id(s) for {len(columns[0]) if columns else 0} row(s) of {model._meta.label}")
    meta = model._meta
    by_attname = {f.attname: f for f in meta.concrete_fields}
    now = timezone.now()
    pk = meta.pk
    rest = [f for f in meta.concrete_fields if f is not pk and f.attname not in fields]
    filler = tuple(now if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
                   else f.get_default() for f in rest)
    return _prepare_rows(model, [pk, *(by_attname[name] for name in fields), *rest], [ids, *columns], tail=filler)


def _checked_count(model: type[models.Model], fields: list[str], columns: list[Sequence[Any]]) -> int:
    """How many rows ``columns`` hold, once checked against ``fields`` of ``model``."""
    meta = model._meta
    if len(columns) != len(fields):
        raise ValueError(f"{len(columns)} column(s) of values for {len(fields)} field(s) of {meta.label}")
    attnames = {f.attname for f in meta.concrete_fields}
    unknown = [name for name in fields if name not in attnames]
    if unknown:
        raise ValueError(f"{meta.label} has no field {unknown[0]!r}")
    return len(columns[0]) if columns else 0


# Allocations between two young-generation collections while an import runs (Python's default: 700).
IMPORT_GC_THRESHOLD = 100_000


@dataclass
class _Collector:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # imports running in this process
    previous: tuple[int, ...] = ()  # the thresholds before the first of them


_collector = _Collector()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run less often for the duration (its thresholds are process-wide: the
    last of overlapping imports puts the previous ones back).

    An import allocates millions of short-lived containers (parsed rows, value tuples) and keeps a few batches
    of them alive: at the default threshold the collector ran 7,000 times per 200,000 ratings, each time walking
    the live batches, for half of the import's client CPU — yet these objects hold no cycles and are freed by
    reference counting.
    """
    with _collector.lock:
        if _collector.users == 0:
            _collector.previous = gc.get_threshold()
            gc.set_threshold(IMPORT_GC_THRESHOLD, *_collector.previous[1:])
        _collector.users += 1
    try:
        yield
    finally:
        with _collector.lock:
            _collector.users -= 1
            if _collector.users == 0:
                gc.set_threshold(*_collector.previous)


# SQLite page cache during an import, in KiB (negative: PRAGMA cache_size's unit is then KiB, not pages).
SQLITE_IMPORT_CACHE_KIB = 64 * 1024


@contextmanager
def import_transaction() -> Iterator[None]:
    """The one transaction an import writes in.

    On SQLite (the embedded default), for its duration: ``synchronous = NORMAL`` — with the WAL journal a crash
    or power loss can lose the last commits but never corrupt the file, and the import is one commit anyway; it
    is only changed in WAL mode and outside a transaction (an import job runs inside its own) — and a large page
    cache, so the indexes being appended to stay in memory. The previous values come back afterwards.
    """
    if connection.vendor != "sqlite":
        with transaction.atomic():
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        wal = cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA synchronous")
        synchronous = cursor.fetchone()[0]
        cursor.execute("PRAGMA cache_size")
        cache_size = cursor.fetchone()[0]
        relax = wal and not connection.in_atomic_block
        if relax:
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_IMPORT_CACHE_KIB}")
    try:
        with transaction.atomic():
            yield
    finally:
        with connection.cursor() as cursor:
            if relax:
                cursor.execute(f"PRAGMA synchronous = {int(synchronous)}")
            cursor.execute(f"PRAGMA cache_size = {int(cache_size)}")


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
        return list(model._default_manager.filter(**{f"{key}__in": ids}).order_by(*order_by).values_list(*columns))
    meta, quote = model._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in columns]
    select = ", ".join(quote(_column(f)) for f in fields)
    order = ", ".join(quote(_column(meta.get_field(name))) for name in order_by)
    sql = (f"SELECT {select} FROM {quote(meta.db_table)} WHERE {quote(_column(meta.get_field(key)))} "
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

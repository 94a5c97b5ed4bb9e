"""Bulk inserts: ids from the sequence (``allocate_ids``), rows prepared without the database
(``prepare_columns``, ``PreparedRows``) and written in one COPY or one prepared INSERT (``write_prepared``,
``insert_columns``, ``insert_rows``, ``bulk_insert``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

from django.db import connection, models, transaction
from django.utils import timezone

from .foreign_keys import foreign_keys_in_bulk
from .values import COPY_FORMATS, column_of, convert_column, converters, copy_column, copy_text, field_kind

M = TypeVar("M", bound=models.Model)


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
    pk_column = column_of(model._meta.pk)
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
    for position, convert in converters(columns[own:]):
        tail_values[position] = convert(tail_values[position])
    tail = tuple(tail_values)
    for position, convert in converters(columns[:own]):
        by_column[position] = convert_column(convert, by_column[position])
    prepared = PreparedRows(model=model, columns=columns)
    if connection.vendor != "postgresql":
        prepared.rows = ([(*row, *tail) for row in zip(*by_column, strict=True)] if tail
                         else list(zip(*by_column, strict=True)))
        return prepared
    # ForeignKey.db_constraint is a plain attribute that django-stubs does not declare.
    prepared.referenced = [
        (f, (set(by_column[position]) if position < own else {tail[position - own]}) - {None})
        for position, f in enumerate(columns) if isinstance(f, models.ForeignKey) and f.db_constraint]  # type: ignore[attr-defined]
    formats = [COPY_FORMATS.get(field_kind(f)) for f in columns]
    if None in formats:  # a column type without a text format below: psycopg formats the rows when written
        prepared.rows = [(*row, *tail) for row in zip(*by_column, strict=True)]
        return prepared
    # COPY's text format written here, the constant columns rendered once: 2.5x less CPU than psycopg's
    # write_row, which rendered the two "now" timestamps of every rating again.
    end = "".join(f"\t{copy_text(formats[own + i], value)}" for i, value in enumerate(tail)) + "\n"
    text_formats = [fmt for fmt in formats[:own] if fmt is not None]  # all of them (checked above)
    # In slices: the server takes in each slice while the next one is sent.
    for start in range(0, len(by_column[0]), COPY_SLICE_ROWS):
        texts = [copy_column(fmt, values[start:start + COPY_SLICE_ROWS])
                 for fmt, values in zip(text_formats, by_column, strict=True)]
        prepared.copy_slices.append(end.join(map("\t".join, zip(*texts, strict=True))) + end)
    return prepared


def write_prepared(prepared: PreparedRows) -> None:
    """Insert rows made by ``prepare_columns``. PostgreSQL: one ``COPY``, its foreign keys
    checked in bulk (see ``foreign_keys_in_bulk``). SQLite: ``executemany`` of one prepared INSERT — the
    statement is compiled once, not once per 500 rows."""
    quote = connection.ops.quote_name
    table = quote(prepared.model._meta.db_table)
    names = ", ".join(quote(column_of(f)) for f in prepared.columns)
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            placeholders = ", ".join(["%s"] * len(prepared.columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", prepared.rows)
            return
        with (foreign_keys_in_bulk(cursor, prepared.referenced), connection.wrap_database_errors,
              cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy):
            for row in prepared.rows:
                copy.write_row(row)
            for text in prepared.copy_slices:
                copy.write(text)


# Rows per ``copy.write``: large enough that a write costs little, small enough that the server starts early.
COPY_SLICE_ROWS = 4096


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

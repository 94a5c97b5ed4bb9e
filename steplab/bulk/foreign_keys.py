"""PostgreSQL's foreign keys checked in bulk for a COPY: one locking query per key instead of a trigger per row."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

from django.db import IntegrityError, connection, models

from .values import column_of


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
def foreign_keys_in_bulk(cursor: Any, referenced: list[tuple[models.ForeignKey, set[Any]]]) -> Iterator[None]:
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
    table, column = quote(target.model._meta.db_table), quote(column_of(target))
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

"""Bulk database writes and reads of both apps: ids from the sequence, COPY inserts, reads by id arrays.

The importers (``annotate.services.importing`` and the ones built on it), the dataset exports, the candidate
pools and the benchmarks all write and read many rows at once through these; PostgreSQL gets ``COPY`` and
array parameters, the embedded SQLite the plain ORM. ``import_transaction`` and ``fewer_collections`` frame a
whole import; ``read_ahead`` overlaps parsing with the database's writing.

The modules: ``writes`` (ids, prepared rows, COPY and INSERT), ``values`` (per-type converters and COPY's text
format), ``foreign_keys`` (PostgreSQL's keys checked in bulk), ``reads`` (by id arrays, planner statistics) and
``frame`` (an import's transaction, collections and read-ahead). The names below are the package's API; what the
modules share among themselves stays theirs.
"""
from .frame import ProgressCallback, fewer_collections, import_transaction, read_ahead
from .reads import refresh_planner_statistics, select_by_ids
from .values import JsonText, json_text
from .writes import (
    PreparedRows,
    allocate_ids,
    bulk_insert,
    insert_columns,
    insert_rows,
    prepare_columns,
    write_prepared,
)

__all__ = [
    "JsonText",
    "PreparedRows",
    "ProgressCallback",
    "allocate_ids",
    "bulk_insert",
    "fewer_collections",
    "import_transaction",
    "insert_columns",
    "insert_rows",
    "json_text",
    "prepare_columns",
    "read_ahead",
    "refresh_planner_statistics",
    "select_by_ids",
    "write_prepared",
]

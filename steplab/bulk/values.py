"""How a value reaches the driver: the per-type converters and COPY's text format, column by column."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo
from functools import partial
from typing import Any

from django.db import connection, models

# Column types whose Python values the drivers take as they are (psycopg's COPY and sqlite3 alike).
_PLAIN_TYPES = frozenset({
    "AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField", "SmallIntegerField",
    "PositiveIntegerField", "PositiveBigIntegerField", "PositiveSmallIntegerField", "BooleanField", "CharField",
    "TextField", "SlugField", "FloatField",
})



def converters(columns: list[models.Field]) -> list[tuple[int, Callable[[Any], Any]]]:
    """(position, function) for the columns whose values need converting before they reach the driver."""
    found: list[tuple[int, Callable[[Any], Any]]] = []
    for position, model_field in enumerate(columns):
        kind = field_kind(model_field)
        if isinstance(model_field, models.JSONField):
            found.append((position, _json_or_null))
        elif kind in _PLAIN_TYPES or (kind == "DateTimeField" and connection.vendor == "postgresql"):
            continue
        elif kind == "DateTimeField" and connection.vendor == "sqlite":
            # USE_TZ is on, so the connection's timezone is set.
            found.append((position, partial(_sqlite_datetime, zone=connection.timezone)))  # type: ignore[arg-type]
        else:
            found.append((position, partial(_prep_save, model_field)))
    return found


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



def convert_column(convert: Callable[[Any], Any], values: Sequence[Any]) -> list[Any]:
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


def copy_column(format_value: Callable[[Any], str], values: Sequence[Any]) -> list[str]:
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


def column_of(field: Any) -> str:
    """A concrete field's column (Django's types also cover reverse relations and non-concrete fields, which have
    none)."""
    column = getattr(field, "column", None)
    if not isinstance(column, str):
        raise TypeError(f"{field!r} has no database column")
    return column


def _prep_save(model_field: models.Field, value: Any) -> Any:
    return model_field.get_db_prep_save(value, connection)


def field_kind(model_field: models.Field) -> str:
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
COPY_FORMATS: dict[str, Callable[[Any], str]] = {
    **{kind: str for kind in ("AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                              "SmallIntegerField", "PositiveIntegerField", "PositiveBigIntegerField",
                              "PositiveSmallIntegerField")},
    "FloatField": repr, "BooleanField": _copy_bool, "DateTimeField": _copy_datetime,
    **{kind: _copy_string for kind in ("CharField", "TextField", "SlugField", "JSONField")},
}


def copy_text(format_value: Callable[[Any], str] | None, value: Any) -> str:
    # the caller checked that every column has a format (no None reaches here)
    return "\\N" if value is None else format_value(value)  # type: ignore[misc]

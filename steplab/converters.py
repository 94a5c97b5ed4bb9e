"""Path converters every URL conf shares. ``<id:name>`` is a database id: digits that fit the id columns (a signed
64-bit integer). A longer number matches no route, so it answers 404 like an id that does not exist, instead of
reaching the database (SQLite raises ``OverflowError`` past 2**63 - 1)."""
from __future__ import annotations

from django.urls import register_converter
from django.urls.converters import IntConverter, get_converters

MAX_ID = 2**63 - 1


class DatabaseIdConverter(IntConverter):
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ID:
            raise ValueError(f"{value} is past the largest database id")  # Django's resolver: no match, a 404
        return number


def register() -> None:
    """Once per process, before any URL conf is read (``AnnotateConfig.ready``)."""
    if "id" not in get_converters():
        register_converter(DatabaseIdConverter, "id")

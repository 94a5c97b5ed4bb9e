"""JSON from outside, bounded in depth and in its numbers.

Python's decoder recurses once per nesting level: a 50 KB body of ``[[[[…`` raises RecursionError (a 500, or an
import error without a line number), and a document just under the interpreter's limit fails later instead, when
it is copied, stored or encoded again. Every request body and every uploaded line is therefore held to
``MAX_JSON_DEPTH`` levels — far above any real row (a PRM800K row is 6 deep).

Its numbers are finite: ``NaN``, ``Infinity`` and ``1e400`` (which Python reads as infinity) fit neither a
``jsonb`` column nor a JSON answer. Such a number is a ``NumberOutOfRange`` naming where it sat
(``provenance.temperature``), so a body gets a 400 naming the field and an import line a rejection naming line and
field, instead of a database error later. Integers stay exact at any size (an id may be a long number); the
fields that store one bound it (``MAX_ID``).
"""
from __future__ import annotations

import codecs
import json
import math
from typing import Any

import orjson
from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

MAX_JSON_DEPTH = 64


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than allowed."""

    def __init__(self, limit: int = MAX_JSON_DEPTH) -> None:
        super().__init__(f"JSON nested more than {limit} levels deep")


MAX_ID = 2**63 - 1  # PostgreSQL's bigint: every id (and every count) fits in it


class NumberOutOfRange(ValueError):
    """A number no column (nor JSON answer) can hold; ``field`` says where it sat in the document."""

    def __init__(self, field: str, text: str) -> None:
        shown = text if len(text) <= 24 else f"{text[:12]}…({len(text)} characters)"
        self.field, self.reason = field, f"{shown} is not a finite number"
        super().__init__(f"{field or 'the document'}: {self.reason}")


class _Refused:
    """What a refused number decodes to, until the walk finds where it sat."""

    def __init__(self, text: str) -> None:
        self.text = text


def _find_refused(value: Any) -> None:
    """Raise NumberOutOfRange at the first refused number (walked without recursion, keys in document order)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, _Refused):
            raise NumberOutOfRange(where, node.text)
        if isinstance(node, dict):
            stack.extend((child, f"{where}.{key}" if where else str(key)) for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{index}]") for index, child in reversed(list(enumerate(node))))


def _json_loads(text: str | bytes) -> Any:
    """``json.loads`` whose non-finite numbers are a NumberOutOfRange naming their place (the document is walked
    only when it holds one)."""
    refused: list[_Refused] = []

    def refuse(text: str) -> _Refused:
        refused.append(_Refused(text))
        return refused[-1]

    def decimal(text: str) -> float | _Refused:
        value = float(text)
        return value if math.isfinite(value) else refuse(text)

    value = json.loads(text, parse_float=decimal, parse_constant=refuse)
    if refused:
        _find_refused(value)
    return value


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """``value`` unchanged when no list/object in it is nested deeper than ``limit`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            raise JSONTooDeep(limit)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


# 19 digits in a row: the shortest integer literal that orjson may read as a float (below -2**63). Found by
# mapping every digit to "0" and the rest to "x" (a regular expression cost more than orjson's parse).
_DIGITS_AS_ZEROS = bytes(ord("0") if ord("0") <= byte <= ord("9") else ord("x") for byte in range(256))
_LONG_DIGITS = b"0" * 19


def loads(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that raises JSONTooDeep (a ValueError) instead of RecursionError or a too-deep document.

    Bytes go through orjson first (3x faster; the JSON decoding was an eighth of a PRM800K import's CPU), whose
    values are json's for every document both accept. Where they differ, json decides: a document orjson refuses
    (NaN, Infinity, a lone surrogate, a BOM, a number past a double) is read again by json, which accepts it or
    raises its own error, and a line with a run of 19 digits (an integer orjson would read as a float past 64
    bits) never reaches orjson. Only json's reading checks the numbers (NumberOutOfRange): orjson accepts no
    number that is not finite.
    """
    value: Any
    try:
        if isinstance(text, bytes) and _LONG_DIGITS not in text.translate(_DIGITS_AS_ZEROS):
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                value = _json_loads(text)
        else:
            value = _json_loads(text)
    except RecursionError:
        raise JSONTooDeep(limit) from None
    # A document opens at most as many levels as it has brackets: most lines need no walk (the walk was a
    # sixth of a PRM800K import's parsing).
    brackets = text.count(b"{") + text.count(b"[") if isinstance(text, bytes) else text.count("{") + text.count("[")
    return value if brackets <= limit else check_depth(value, limit)


class BoundedJSONParser(parsers.JSONParser):
    """DRF's JSON parser read through ``loads``: a body nested too deeply is a 400 like any other malformed body,
    and a number out of range a 400 naming its field."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read()
        try:
            if codecs.lookup(encoding).name != "utf-8":
                raw = raw.decode(encoding)
            return loads(raw)
        except NumberOutOfRange as error:
            raise ValidationError({error.field or "non_field_errors": [str(error)]}) from None
        except (ValueError, UnicodeDecodeError) as error:  # json's errors, JSONTooDeep
            raise ParseError(f"JSON parse error - {error}") from None

"""Import lines are decoded by orjson where it agrees with json, by json everywhere else: for every line the
value (with its types: an integer past 64 bits stays an exact integer) or the error is json's — but for a number
that is not finite (NaN, Infinity, 1e400), which no jsonb column holds: refused, naming where it sat."""
from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steplab import jsonlimits

TRICKY = [
    b'{"a": 18446744073709551615}', b'{"a": 18446744073709551616}', b'[-9223372036854775809]',
    b'{"big": 123456789012345678901234567890}', b'[1e400]', b'[NaN]', b'[Infinity, -Infinity]', b'"\\ud800"',
    b'"\\udc00\\ud800"', b'"\xed\xa0\x80"', b'\xef\xbb\xbf{"bom": 1}', b'{"a": 1, "a": 2}', b'[1.5e-400, -0, 0.1]',
    b'"\\u00e9\\ud83d\\ude00"', b'"a\x01b"', b'[1,]', b'{} x', b'\xff', b'[' * 70 + b']' * 70, b'  {"k": [true]}  ',
    b'{"p": {"t": [1, NaN]}}', b'{"a": 1, "a": 1e999}', b'{"a": 1e999, "a": 1}',
]


def _outcome(decode: Any, line: bytes) -> tuple[str, Any]:
    try:
        value = decode(line)
    except jsonlimits.JSONTooDeep:
        return "too deep", None
    except jsonlimits.NumberOutOfRange as error:
        return "not finite", error.field
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return "error", type(error).__name__
    return "value", json.dumps(value, sort_keys=True) + repr(_types(value))


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


def _not_finite(value: Any, where: str = "") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise jsonlimits.NumberOutOfRange(where, repr(value))
    if isinstance(value, dict):
        for key, item in value.items():
            _not_finite(item, f"{where}.{key}" if where else key)
    if isinstance(value, list):
        for index, item in enumerate(value):
            _not_finite(item, f"{where}[{index}]")


def _json_then_depth(line: bytes) -> Any:
    value = jsonlimits.check_depth(json.loads(line))
    _not_finite(value)
    return value


@pytest.mark.parametrize("line", TRICKY)
def test_tricky_lines_decode_as_json_decodes_them(line: bytes) -> None:
    assert _outcome(jsonlimits.loads, line) == _outcome(_json_then_depth, line)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_generated_lines_decode_as_json_decodes_them(value: Any) -> None:
    line = json.dumps(value).encode()
    assert _outcome(jsonlimits.loads, line) == _outcome(_json_then_depth, line)

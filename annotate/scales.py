"""Step label scales as data: what values a step may get, how each looks and is keyed, which values are errors.

A campaign stores its scale as plain data (``Campaign.step_scale``): empty or ``{"name": "pm1"}`` is PRM800K's
−1 / 0 / +1 (every existing campaign, export and API), ``{"name": "binary"}`` correct / incorrect, and a custom
scale lists 2–5 ordered values. Every place that reads a rating asks the scale — the labeling service (what may be
stored, what stops a stepwise pass), forms and API, the workspace's buttons and keys, agreement, adjudication,
machine labels and the exports — and the training node receives ``training_map()``, a plain dict.

Plain Python: no Django, so ``rewards.training`` may receive the same data.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RATING_MIN, RATING_MAX = -9, 9  # stored ratings lie here (annotate.models checks the same range)
_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")
_RESERVED_KEYS = frozenset("jkfsc?")  # the workspace's other shortcuts (move, Unsure, bad split, continue, help)
#: the error categories' keys, first free ones first (at most 9 categories, at most 5 scale keys)
_CATEGORY_KEYS = "qwertyuiopadghlzxvbnm"


class ScaleError(ValueError):
    """A scale definition is wrong; ``key`` names the field (``values[2].key``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class ScaleValue:
    value: int  # what a Rating stores
    label: str
    key: str  # the keyboard shortcut in the workspace
    colour: str
    is_error: bool  # stops a stepwise pass, as PRM800K's −1 does
    positive: bool | None  # training: True = a good step, False = a bad one, None = neutral (the export's choice)

    def as_data(self) -> dict[str, Any]:
        return {"value": self.value, "label": self.label, "key": self.key, "colour": self.colour,
                "is_error": self.is_error, "positive": self.positive}


@dataclass(frozen=True)
class Scale:
    name: str
    values: tuple[ScaleValue, ...]

    @property
    def allowed(self) -> frozenset[int]:
        return frozenset(v.value for v in self.values)

    @property
    def error_values(self) -> frozenset[int]:
        return frozenset(v.value for v in self.values if v.is_error)

    @property
    def ordinal(self) -> tuple[int, ...]:
        """The values in order, lowest first (agreement's weighted kappa reads distances on it)."""
        return tuple(sorted(self.allowed))

    @property
    def is_pm1(self) -> bool:
        return self.name == "pm1"

    def is_error(self, rating: int | None) -> bool:
        return rating is not None and rating in self.error_values

    def get(self, rating: int | None) -> ScaleValue | None:
        return next((v for v in self.values if v.value == rating), None)

    def word(self, rating: int | None) -> str:
        found = self.get(rating)
        return "no rating" if found is None else found.label

    def choices(self) -> list[tuple[str, str]]:
        return [(str(v.value), v.label) for v in self.values]

    def says_correct(self, rating: int) -> bool | None:
        """The rating as a boolean for training (TRL stepwise, outcome): None for a neutral value."""
        found = self.get(rating)
        return None if found is None else found.positive

    def training_map(self) -> dict[int, bool | None]:
        """Plain data for the node: value -> positive / negative / neutral."""
        return {v.value: v.positive for v in self.values}

    def keys(self) -> dict[str, int]:
        return {v.key: v.value for v in self.values}

    def error_category_keys(self, categories: list[str]) -> list[tuple[str, str]]:
        """(category, key) in order: letters of their own, never a rating key, so that the rating keys go on
        rating a step after its error (PRM800K's ``1 2 3`` included) while a letter names the kind of error."""
        taken = {key.lower() for key in self.keys()} | _RESERVED_KEYS
        free = [key for key in _CATEGORY_KEYS if key not in taken]
        return list(zip(categories, free, strict=False))

    def as_data(self) -> dict[str, Any]:
        return {"name": self.name, "values": [v.as_data() for v in self.values]}


PM1 = Scale("pm1", (
    ScaleValue(-1, "−1 (bad)", "1", "#c62828", True, False),
    ScaleValue(0, "0 (okay)", "2", "#9e9e9e", False, None),
    ScaleValue(1, "+1 (great)", "3", "#2e7d32", False, True),
))
BINARY = Scale("binary", (
    ScaleValue(-1, "Incorrect", "1", "#c62828", True, False),
    ScaleValue(1, "Correct", "2", "#2e7d32", False, True),
))
NAMED = {PM1.name: PM1, BINARY.name: BINARY}


def _custom_value(item: Any, where: str) -> ScaleValue:
    if not isinstance(item, Mapping):
        raise ScaleError(where, "must be an object with value, label, key, colour, is_error and positive")
    value = item.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or not RATING_MIN <= value <= RATING_MAX:
        raise ScaleError(f"{where}.value", f"must be an integer from {RATING_MIN} to {RATING_MAX}, got {value!r}")
    label = item.get("label")
    if not isinstance(label, str) or not label.strip() or len(label) > 40:
        raise ScaleError(f"{where}.label", "must be a text of 1 to 40 characters")
    key = item.get("key")
    if not isinstance(key, str) or len(key) != 1 or key.isspace() or key.lower() in _RESERVED_KEYS:
        raise ScaleError(f"{where}.key", f"must be one character that is not a space nor one of "
                                         f"{''.join(sorted(_RESERVED_KEYS))}, got {key!r}")
    colour = item.get("colour", "#607d8b")
    if not isinstance(colour, str) or not _COLOUR.match(colour):
        raise ScaleError(f"{where}.colour", f"must look like #1a2b3c, got {colour!r}")
    is_error, positive = item.get("is_error", False), item.get("positive")
    if not isinstance(is_error, bool):
        raise ScaleError(f"{where}.is_error", "must be true or false")
    if positive is not None and not isinstance(positive, bool):
        raise ScaleError(f"{where}.positive", "must be true, false or null (neutral)")
    if is_error and positive:
        raise ScaleError(f"{where}.positive", "an error value cannot count as positive in training")
    return ScaleValue(value, label.strip(), key, colour, is_error, positive)


def scale_from_data(data: Mapping[str, Any] | None) -> Scale:
    """The scale a campaign's ``step_scale`` describes; ScaleError naming the field when it is wrong."""
    if not data:
        return PM1
    if not isinstance(data, Mapping):
        raise ScaleError("scale", "must be an object")
    name = data.get("name", "custom")
    raw = data.get("values")
    if raw is None:
        if name not in NAMED:
            raise ScaleError("scale.name", f"unknown scale {name!r}; expected {', '.join(NAMED)} or a list of values")
        return NAMED[name]
    if not isinstance(name, str) or not name.strip() or len(name) > 40:
        raise ScaleError("scale.name", "must be a text of 1 to 40 characters")
    if not isinstance(raw, list) or not 2 <= len(raw) <= 5:
        raise ScaleError("scale.values", "must list 2 to 5 values")
    values = tuple(_custom_value(item, f"scale.values[{i}]") for i, item in enumerate(raw))
    for attribute in ("value", "key"):
        seen = [getattr(v, attribute) for v in values]
        if len(set(seen)) != len(seen):
            raise ScaleError(f"scale.values.{attribute}", f"each value needs its own {attribute}")
    if [v.value for v in values] != sorted(v.value for v in values):
        raise ScaleError("scale.values", "must be listed from the lowest value to the highest")
    if not any(v.is_error for v in values):
        raise ScaleError("scale.values", "at least one value must be an error (it ends a stepwise pass)")
    if all(v.is_error for v in values):
        raise ScaleError("scale.values", "at least one value must not be an error")
    named = NAMED.get(name)
    if named is not None and values != named.values:
        raise ScaleError("scale.name", f"{name!r} is a built-in scale; give a custom scale another name")
    return Scale(name.strip(), values)


def campaign_scale(campaign: Any) -> Scale:
    """The scale of a campaign (anything with a ``step_scale`` attribute)."""
    return scale_from_data(getattr(campaign, "step_scale", None))

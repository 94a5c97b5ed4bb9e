"""An LLM as a step judge: the prompt templates, their rendering, the answer's parser and the value mapping.

A template renders a fixed set of fields (``FIELDS``: the campaign's scale, the problem, the numbered steps and
their count) with ``str.format_map`` over a closed dict: a field's text is inserted as it is and never read as a
template, and the step delimiters in a field are neutralised so a step cannot pose as another. Each template has a
version, which goes into the label source's name (``llm:<model>@<version>``): a changed prompt is a new source.

The default asks, as ProcessBench does, for the earliest wrong step (−1: none) and a one-line reason per flagged
step, as a JSON object. The parser reads that object (JSON mode, or an object inside prose or a code fence) and
otherwise only unambiguous forms (``\\boxed{k}``, ``first_error: k``); anything else is ``Unparsable``, never a
guess. The mapping: steps before the judged first error are correct (1), that step wrong (0), later steps
unlabeled; "no error" makes every step correct.

Plain Python (no Django): the job runs it in a worker, the bench without the web app.
"""
from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .client import ChatMessage

#: the only fields a template may name
FIELDS = frozenset({"scale", "problem", "steps", "step_count"})
MAX_REASON_CHARS = 300
_TAG = re.compile(r"<(/?)(step)", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")
_KEYED = re.compile(r"\"?(?:first_error|earliest_error)\"?\s*[:=]\s*(?:\{\s*\"(?:index|step)\"\s*:\s*)?(-?\d+)",
                    re.IGNORECASE)
_INDEX_KEYS = ("first_error", "earliest_error", "first_error_step", "index")


class TemplateError(ValueError):
    """A template names a field it may not, or uses format syntax beyond plain ``{field}``."""


def _check_fields(text: str, where: str) -> None:
    for _, name, spec, conversion in string.Formatter().parse(text):
        if name is None:
            continue
        if name not in FIELDS:
            raise TemplateError(f"{where}: unknown field {{{name}}}; a template may name {', '.join(sorted(FIELDS))}")
        if spec or conversion:
            raise TemplateError(f"{where}: field {{{name}}} takes no format spec or conversion")


def _neutral(text: str) -> str:
    """A field's text with the step delimiters defused (``<step_3>`` → ``‹step_3>``)."""
    return _TAG.sub(lambda match: f"‹{match.group(1)}{match.group(2)}", text)


@dataclass(frozen=True)
class JudgeTemplate:
    """A versioned prompt: a system message and a user message over ``FIELDS``."""

    version: str
    system: str
    user: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,40}", self.version):
            raise TemplateError(f"version {self.version!r}: 1–40 letters, digits, '.', '_' or '-'")
        _check_fields(self.system, f"template {self.version} system")
        _check_fields(self.user, f"template {self.version} user")

    def fields(self, *, problem: str, steps: Sequence[str], scale: str) -> dict[str, str]:
        numbered = "\n\n".join(f"<step_{index}>\n{_neutral(text)}\n</step_{index}>" for index, text in enumerate(steps))
        return {"scale": _neutral(scale), "problem": _neutral(problem), "steps": numbered,
                "step_count": str(len(steps))}

    def render(self, *, problem: str, steps: Sequence[str], scale: str) -> list[ChatMessage]:
        """The chat messages for one solution."""
        values = self.fields(problem=problem, steps=steps, scale=scale)
        return [{"role": "system", "content": self.system.format_map(values)},
                {"role": "user", "content": self.user.format_map(values)}]


_ANSWER_FORMAT = (
    'Answer with one JSON object and nothing else: {{"first_error": <the index of the earliest wrong step, or -1 '
    'if every step is correct>, "reasons": {{"<index>": "<one line: why that step is wrong>"}}}}. Give a reason '
    "for each step you flag; flag none when first_error is -1.")

PROCESSBENCH = JudgeTemplate(
    version="processbench-v1",
    system="You are a careful grader of step-by-step math solutions.",
    user=("The following is a math problem and a solution, split into {step_count} steps, each enclosed in tags "
          "and indexed from 0.\n\nThe steps are labeled on this scale: {scale}\n\n[Math Problem]\n\n{problem}\n\n"
          "[Solution]\n\n{steps}\n\nReview and critique the solution step by step. Once you identify an error in "
          "a step, the earliest such step is the answer; a step that builds on an earlier error is not the "
          "earliest. " + _ANSWER_FORMAT))

GENERAL = JudgeTemplate(
    version="steps-v1",
    system="You are a careful grader of step-by-step reasoning.",
    user=("The following is a question and an answer's reasoning, split into {step_count} steps, each enclosed "
          "in tags and indexed from 0.\n\nThe steps are labeled on this scale: {scale}\n\n[Question]\n\n{problem}"
          "\n\n[Reasoning]\n\n{steps}\n\nReview the reasoning step by step: a step is wrong when it states "
          "something false, misreads the question or does not follow from what came before. " + _ANSWER_FORMAT))

#: the template each grader's domain uses; any other grader gets ``GENERAL``
DOMAIN_TEMPLATES: dict[str, JudgeTemplate] = {"math": PROCESSBENCH}
TEMPLATES: dict[str, JudgeTemplate] = {template.version: template for template in (PROCESSBENCH, GENERAL)}


def template_for(grader: str) -> JudgeTemplate:
    """The default template of a campaign's domain (named by its grader)."""
    return DOMAIN_TEMPLATES.get(grader, GENERAL)


@dataclass(frozen=True)
class Verdict:
    """A parsed judgment: the earliest wrong step (-1: none) and the reasons given per flagged step."""

    first_error: int
    reasons: dict[int, str] = field(default_factory=dict)
    #: "json" (an object) or "tolerant" (a boxed or keyed index in prose)
    parsed_by: str = "json"


@dataclass(frozen=True)
class Unparsable:
    """An answer the parser could not read; ``why`` says what was wrong, nothing is guessed from it."""

    why: str


def _objects(text: str) -> list[Any]:
    """Every JSON value decodable at an opening brace of ``text`` (fenced blocks first)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for chunk in [*_FENCE.findall(text), text]:
        start = chunk.find("{")
        while start != -1:
            try:
                value, end = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                start = chunk.find("{", start + 1)
                continue
            found.append(value)
            start = chunk.find("{", end)
    return found


def _index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON_CHARS else line[:MAX_REASON_CHARS - 1] + "…"


def _reasons(value: Any) -> dict[int, str]:
    """``{"3": "why"}``, ``[{"step": 3, "reason": "why"}]`` or a list of strings indexed by step."""
    reasons: dict[int, str] = {}
    if isinstance(value, Mapping):
        items = [(_index(key), text) for key, text in value.items()]
    elif isinstance(value, list):
        items = [((_index(item.get("step", item.get("index"))), item.get("reason"))
                  if isinstance(item, Mapping) else (None, None)) for item in value]
    else:
        items = []
    for index, text in items:
        if index is not None and isinstance(text, str) and text.strip():
            reasons[index] = _one_line(text)
    return reasons


def _from_object(value: Any) -> tuple[int, dict[int, str]] | None:
    if not isinstance(value, Mapping):
        return None
    key = next((key for key in _INDEX_KEYS if key in value), None)
    if key is None:
        return None
    raw, said = value[key], value
    if isinstance(raw, Mapping):  # {"first_error": {"index": 2, "reason": "…"}}, as small models answer
        if "index" not in raw and "step" not in raw:
            return None
        raw, said = raw.get("index", raw.get("step")), raw
    index = -1 if raw is None else _index(raw)
    if index is None:
        return None
    reasons = _reasons(value.get("reasons"))
    reason = said.get("reason", said.get("reasoning"))
    if isinstance(reason, str) and index >= 0 and reason.strip():
        reasons.setdefault(index, _one_line(reason))
    return index, reasons


def parse_verdict(text: str, step_count: int) -> Verdict | Unparsable:
    """The judge's answer read as a verdict on ``step_count`` steps, or why it cannot be."""
    if not text or not text.strip():
        return Unparsable("an empty answer")
    readings = [reading for reading in map(_from_object, _objects(text)) if reading is not None]
    parsed_by = "json"
    if not readings:
        parsed_by = "tolerant"
        indexes = {int(match) for match in _BOXED.findall(text)} | {int(match) for match in _KEYED.findall(text)}
        readings = [(index, {}) for index in sorted(indexes)]
    if not readings:
        return Unparsable("no first_error object, boxed index or 'first_error: k' in the answer")
    if len({index for index, _ in readings}) > 1:
        return Unparsable(f"the answer names different first errors: {sorted({i for i, _ in readings})}")
    index, reasons = readings[0]
    if not -1 <= index < step_count:
        return Unparsable(f"first error {index} is not a step of this solution (0–{step_count - 1}, or -1)")
    # only the first error's reason is kept: the labels end at that step
    reasons = {step: reason for step, reason in reasons.items() if step == index}
    return Verdict(first_error=index, reasons=reasons, parsed_by=parsed_by)


def step_values(verdict: Verdict, step_count: int) -> list[tuple[int, float]]:
    """(step index, P(correct)): before the first error 1, the first error 0, later steps unlabeled; no error:
    every step 1."""
    if verdict.first_error < 0:
        return [(index, 1.0) for index in range(step_count)]
    return [(index, 1.0) for index in range(verdict.first_error)] + [(verdict.first_error, 0.0)]


def describe_scale(values: Sequence[tuple[str, bool]]) -> str:
    """A scale as a line for the prompt: each value's label, errors marked (``Good; Okay; Bad (an error)``)."""
    return "; ".join(f"{label} (an error)" if is_error else label for label, is_error in values)

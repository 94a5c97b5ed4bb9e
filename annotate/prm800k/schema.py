"""The PRM800K row, as OpenAI released it: its schema written once, parsing and validation (``RowError`` names
the field), and the names and digests both directions share."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from django.conf import settings
from django.utils import timezone

from stepcore.steps import ANSWER_HEADER, answer_from_steps

from ..models import (
    RATIONALE_MAX_CHARS,
    FinishReason,
    Problem,
    text_digest,
)
from ..services.importing import RowError
from ..services.labeling import check_stop_at_first_error

# --- the accepted shapes, written once ------------------------------------------------------------
# Every value shape the released PRM800K files hold (phase 1 and 2, give_up / found_error / solution rows,
# screening and QC rows), audited on genuine rows. ``parse_row`` validates against these tables and the
# property test (tests/foundation/test_prm800k_schema.py) generates rows of every shape from them, so the code,
# the README table and the tests cannot drift apart. Shapes: "null", "string", "int", "number" (int or float),
# "bool", "rating" (-1, 0, 1 as int or float), "finish_reason" (one of FINISH_REASONS), "object", "list".
# ``required`` keys must be present; optional ones may be absent (absent and null are exported as they came).
FINISH_REASONS = tuple(FinishReason.values)
MAX_TIMESTAMP_CHARS = 64


_PLAIN_SHAPES: dict[str, type] = {"null": type(None), "string": str, "int": int, "bool": bool, "object": dict,
                                  "list": list}


@dataclass(frozen=True)
class Field:
    shapes: tuple[str, ...]
    required: bool = False

    @cached_property
    def plain_types(self) -> frozenset[type]:
        """The exact Python types that match without a value check (``bool`` is not an ``int`` here): the
        import's hot path tests these first; numbers, ratings and finish reasons go through ``_matches``."""
        return frozenset(_PLAIN_SHAPES[shape] for shape in self.shapes if shape in _PLAIN_SHAPES)


ROW_SCHEMA: dict[str, Field] = {
    "labeler": Field(("string", "null")),
    "timestamp": Field(("string", "null")),
    "generation": Field(("int", "null")),  # -1 marks the initial screening set
    "is_quality_control_question": Field(("bool",)),
    "is_initial_screening_question": Field(("bool",)),
    "question": Field(("object",), required=True),
    "label": Field(("object",), required=True),
}
QUESTION_SCHEMA: dict[str, Field] = {
    "problem": Field(("string",), required=True),
    "ground_truth_answer": Field(("string", "null")),
    "ground_truth_solution": Field(("string", "null")),
    "pre_generated_steps": Field(("list", "null")),  # of strings
    "pre_generated_answer": Field(("string", "null")),
    "pre_generated_verifier_score": Field(("number", "string", "null")),
}
LABEL_SCHEMA: dict[str, Field] = {
    "steps": Field(("list",), required=True),  # of step objects
    "total_time": Field(("int", "null")),  # milliseconds, >= 0
    "finish_reason": Field(("finish_reason", "null")),
}
STEP_SCHEMA: dict[str, Field] = {  # every key present, in this order
    "completions": Field(("list", "null"), required=True),  # of completion objects; null at the end of a give_up
    "human_completion": Field(("null", "string", "object"), required=True),  # object: HUMAN_COMPLETION_SCHEMA
    "chosen_completion": Field(("int", "null"), required=True),  # an index into completions
}
COMPLETION_SCHEMA: dict[str, Field] = {  # every key present, in this order
    "text": Field(("string",), required=True),
    "rating": Field(("rating", "null"), required=True),
    "flagged": Field(("bool", "null"), required=True),
    # Steplab's own: the labeler's one-line reason for a −1, present only when there is one.
    "rationale": Field(("string",)),
}
HUMAN_COMPLETION_SCHEMA: dict[str, Field] = {  # exported in this order
    "text": Field(("string",), required=True),
    "rating": Field(("rating", "null")),
    "source": Field(("string", "null")),
    "flagged": Field(("bool", "null")),
}
_OBJECT = Field(("object",))
_STRING = Field(("string",))
ROW_KEYS = tuple(ROW_SCHEMA)
QUESTION_KEYS = tuple(QUESTION_SCHEMA)
LABEL_KEYS = tuple(LABEL_SCHEMA)
# Imported labelers live in their own namespace: ":" is not allowed in a username that a person can register
# or that createsuperuser accepts, so an imported "admin" can never be (or become) the account "admin".
IMPORTED_LABELER_PREFIX = "imported:"


def _shape_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "list" if isinstance(value, list) else type(value).__name__


_SHAPE_WORDS = {"null": "null", "string": "a string", "int": "an integer", "number": "a number", "bool": "a boolean",
                "object": "an object", "list": "a list", "rating": "-1, 0, 1",
                "finish_reason": "one of " + ", ".join(FINISH_REASONS)}


def _matches(value: Any, shape: str) -> bool:
    actual = _shape_of(value)
    if shape == "number":  # finite: NaN and Infinity are not JSON and PostgreSQL's jsonb refuses them
        return actual == "int" or (actual == "number" and math.isfinite(value))
    if shape == "rating":
        return actual in ("int", "number") and value in (-1, 0, 1)
    if shape == "finish_reason":
        return value in FINISH_REASONS
    return actual == shape


def _check(value: Any, spec: Field, field: str) -> Any:
    if type(value) in spec.plain_types:
        return value
    if not any(_matches(value, shape) for shape in spec.shapes):
        allowed = " or ".join(_SHAPE_WORDS[shape] for shape in spec.shapes)
        got = json.dumps(value) if _shape_of(value) in ("int", "number", "string") and len(str(value)) < 40 \
            else _shape_of(value)
        raise RowError(field, f"must be {allowed}, got {got}")
    return value


def _check_object(obj: dict[str, Any], schema: dict[str, Field], where: str, *, closed: bool) -> None:
    """Every key of ``schema`` present when required and of an accepted shape; ``closed``: no other key."""
    prefix = f"{where}." if where else ""
    for key, spec in schema.items():
        if key in obj:
            value = obj[key]
            if type(value) not in spec.plain_types:  # the field name is built only when a value needs a look
                _check(value, spec, prefix + key)
        elif spec.required:
            raise RowError(prefix + key, "is missing")
    if closed:
        unknown = [key for key in obj if key not in schema]
        if unknown:
            raise RowError(prefix + str(unknown[0]), f"is not a PRM800K key (accepted: {', '.join(schema)})")


@dataclass
class ParsedCompletion:
    text: str
    rating: int | None
    flagged: bool | None
    rationale: str = ""


@dataclass
class ParsedStep:
    completions: list[ParsedCompletion] | None
    human_completion: Any
    chosen_completion: int | None

    @property
    def chosen_text(self) -> str | None:
        """The text the pass continued with at this step: the chosen completion or the labeler's own."""
        if self.chosen_completion is not None and self.completions:
            return self.completions[self.chosen_completion].text
        if isinstance(self.human_completion, dict):
            return self.human_completion.get("text")
        return self.human_completion if isinstance(self.human_completion, str) else None


@dataclass
class ParsedRow:
    raw: dict[str, Any]
    labeler: str | None
    timestamp: str | None
    generation: int | None
    is_quality_control: bool
    is_screening: bool
    question: dict[str, Any]
    steps: list[ParsedStep]
    total_time: int | None
    finish_reason: str | None

    @property
    def is_conversational(self) -> bool:
        """Phase-1 (conversational) data: the steps are the labeler's path through several rated completions,
        not pre-generated ones (phase 2 rows, which carry ``pre_generated_steps``, rate alternatives only at the
        step where the error was found)."""
        return self.question.get("pre_generated_steps") is None and any(
            sum(c.rating is not None for c in step.completions or ()) > 1 for step in self.steps)

    def final_answer(self) -> str | None:
        """The answer the solution reaches: phase 2's ``pre_generated_answer``, else the ``# Answer`` step of the
        chosen path (phase 1). None when the pass never reaches one (an error found first, a give_up)."""
        pre_generated = self.question.get("pre_generated_answer")
        if isinstance(pre_generated, str):
            return pre_generated
        for step in self.steps:
            text = step.chosen_text
            if text is None:
                return None
            lines = text.splitlines()
            for position, line in enumerate(lines):  # "Exactly.\n\n# Answer\n\n468" holds one too
                if ANSWER_HEADER.match(line.strip()):
                    return answer_from_steps(["\n".join(lines[position:])])
        return None


def parse_row(obj: Any) -> ParsedRow:
    """Validate one PRM800K row against the schema above; RowError names the first bad field."""
    if not isinstance(obj, dict):
        raise RowError("", f"a row must be a JSON object, got {_shape_of(obj)}")
    _check_object(obj, ROW_SCHEMA, "", closed=False)  # other row keys are kept and exported as they came
    timestamp = obj.get("timestamp")
    if timestamp is not None and len(timestamp) > MAX_TIMESTAMP_CHARS:
        raise RowError("timestamp", f"is longer than {MAX_TIMESTAMP_CHARS} characters")
    question = obj["question"]
    _check_object(question, QUESTION_SCHEMA, "question", closed=False)
    if not question["problem"].strip():
        raise RowError("question.problem", "is empty")
    pre_generated_steps = question.get("pre_generated_steps") or ()
    if not all(type(item) is str for item in pre_generated_steps):  # the field name only for a bad item
        for position, item in enumerate(pre_generated_steps):
            _check(item, _STRING, f"question.pre_generated_steps[{position}]")
    label = obj["label"]
    _check_object(label, LABEL_SCHEMA, "label", closed=False)
    raw_steps = label["steps"]
    if len(raw_steps) > settings.STEPLAB_MAX_STEPS_PER_SOLUTION:
        raise RowError("label.steps",
                       f"has {len(raw_steps)} steps; the limit is {settings.STEPLAB_MAX_STEPS_PER_SOLUTION}")
    max_chars = settings.STEPLAB_MAX_STEP_CHARS
    steps = [_parse_step(raw_step, index, max_chars) for index, raw_step in enumerate(raw_steps)]
    total_time = label.get("total_time")
    if total_time is not None and not 0 <= total_time < 2**63:
        raise RowError("label.total_time", f"must be between 0 and 2**63-1 (milliseconds), got {total_time}")
    generation = obj.get("generation")
    if generation is not None and not -2**31 <= generation < 2**31:
        raise RowError("generation", f"must be a 32-bit integer, got {generation}")
    _check_stepwise_pass(steps)
    return ParsedRow(
        raw=obj, labeler=obj.get("labeler"), timestamp=timestamp, generation=generation,
        is_quality_control=obj.get("is_quality_control_question", False),
        is_screening=obj.get("is_initial_screening_question", False), question=question, steps=steps,
        total_time=total_time, finish_reason=label.get("finish_reason"),
    )


_COMPLETION_KEYS = frozenset(COMPLETION_SCHEMA) - {"rationale"}


def _is_plain_completion(item: Any) -> bool:
    """The shape nearly every completion has (exactly the three keys, an integer rating or none): accepted
    without the general checks, which cost a third of a 1M-rating import when run on every one."""
    return (type(item) is dict and item.keys() == _COMPLETION_KEYS and type(item["text"]) is str
            and (item["rating"] is None or (type(item["rating"]) is int and -1 <= item["rating"] <= 1))
            and (item["flagged"] is None or type(item["flagged"]) is bool))


_STEP_KEYS = frozenset(STEP_SCHEMA)


def _is_plain_step(raw_step: Any) -> bool:
    """The shape nearly every step has (exactly the three keys, values of accepted types): accepted without the
    general checks, like ``_is_plain_completion``."""
    return (type(raw_step) is dict and raw_step.keys() == _STEP_KEYS
            and (raw_step["completions"] is None or type(raw_step["completions"]) is list)
            and (raw_step["human_completion"] is None or type(raw_step["human_completion"]) in (str, dict))
            and (raw_step["chosen_completion"] is None or type(raw_step["chosen_completion"]) is int))


def _parse_step(raw_step: Any, index: int, max_chars: int) -> ParsedStep:
    """Step ``index`` of ``label.steps``; its field names are spelled out only for an error."""
    if not _is_plain_step(raw_step):  # the checks that name the field, for anything out of the ordinary
        _check(raw_step, _OBJECT, f"label.steps[{index}]")
        _check_object(raw_step, STEP_SCHEMA, f"label.steps[{index}]", closed=True)
    completions: list[ParsedCompletion] | None = None
    if raw_step["completions"] is not None:
        completions = []
        for position, item in enumerate(raw_step["completions"]):
            if not _is_plain_completion(item):
                here = f"label.steps[{index}].completions[{position}]"
                _check(item, _OBJECT, here)
                _check_object(item, COMPLETION_SCHEMA, here, closed=True)
            if len(item["text"]) > max_chars:
                raise RowError(f"label.steps[{index}].completions[{position}].text",
                               f"is longer than {max_chars} characters")
            rating = item["rating"]
            parsed = ParsedCompletion(item["text"], None if rating is None else int(rating), item["flagged"])
            if "rationale" in item:
                parsed.rationale = _rationale(item["rationale"], parsed.rating,
                                              f"label.steps[{index}].completions[{position}].rationale")
            completions.append(parsed)
    chosen = raw_step["chosen_completion"]
    if chosen is not None and not 0 <= chosen < len(completions or ()):
        raise RowError(f"label.steps[{index}].chosen_completion",
                       f"is {chosen}, out of range for {len(completions or ())} completion(s)")
    human = raw_step["human_completion"]
    if isinstance(human, dict):
        _check_object(human, HUMAN_COMPLETION_SCHEMA, f"label.steps[{index}].human_completion", closed=True)
    return ParsedStep(completions, human, chosen)


def _rationale(value: str, rating: int | None, field: str) -> str:
    """A completion's ``rationale`` as the workspace stores it: one line, at most RATIONALE_MAX_CHARS, on a −1."""
    if "\n" in value or "\r" in value:
        raise RowError(field, "must be one line (it has a line break)")
    if len(value.strip()) > RATIONALE_MAX_CHARS:
        raise RowError(field, f"is longer than {RATIONALE_MAX_CHARS} characters")
    if value.strip() and rating != -1:
        raise RowError(field, f"is given with rating {rating}: a rationale goes with a −1 only")
    return value.strip()


def _check_stepwise_pass(steps: list[ParsedStep]) -> None:
    """A stepwise pass (one completion per step, none written by the labeler) keeps stop-at-first-error, as
    the workspace does: no gap before a rated step, nothing rated after the first −1. Every genuine PRM800K
    row of that shape does; conversational rows rate alternatives after a −1 and are not this rule's."""
    if any(len(step.completions or ()) > 1 or step.human_completion is not None for step in steps):
        return
    broken = check_stop_at_first_error([step.completions[0].rating if step.completions else None
                                        for step in steps])
    if broken is not None:
        index, why = broken
        raise RowError(f"label.steps[{index}].completions[0].rating", why)


def float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def parse_timestamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        parsed = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
        return parsed.astimezone(UTC)  # an offset at year 1 or 9999 leaves the range: no time
    except (ValueError, OverflowError):
        return None


def content_digest(problem: str, step_texts: list[str]) -> str:
    return hashlib.sha256(json.dumps([problem, step_texts], ensure_ascii=False).encode()).hexdigest()


def question_from_fields(problem: Problem, *, pre_generated_steps: list[str] | None, final_answer: str | None,
                         verifier_score: float | None) -> dict[str, Any]:
    """The PRM800K `question` object that Steplab's relational fields (the problem's, the solution's) give,
    before overrides."""
    return {
        "problem": problem.text,
        "ground_truth_answer": problem.answer,
        "ground_truth_solution": problem.solution,
        "pre_generated_steps": pre_generated_steps,
        "pre_generated_answer": final_answer,
        "pre_generated_verifier_score": verifier_score,
    }


def imported_username(labeler: str) -> str | None:
    """The account name of an imported labeler; None when the string cannot be one (empty or too long: the
    assignment then keeps the string itself and the account is named by its digest)."""
    name = IMPORTED_LABELER_PREFIX + labeler
    return name if labeler and len(name) <= 150 else None


def labeler_account(labeler: str) -> str:
    return imported_username(labeler) or f"{IMPORTED_LABELER_PREFIX}sha256:{text_digest(labeler)[:32]}"


def exported_labeler(username: str) -> str:
    return username.removeprefix(IMPORTED_LABELER_PREFIX)

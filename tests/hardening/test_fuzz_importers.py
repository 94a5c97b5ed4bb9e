"""Property-based bad input for every importer's row parser: a row is accepted or rejected naming a field —
never another exception; generated valid rows are accepted and each one-field corruption of them is rejected
with its file, line and field. Then the size limits: 10,000 steps and 1 MB steps are accepted, one more is
refused."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from annotate.prm800k import parse_row
from annotate.services.importing import ImportReport, RowError, iter_json_lines, validate_file
from annotate.services.problems import make_solution_parser, parse_problem

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, width=16) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
KNOWN_FIELDS = {"labeler", "timestamp", "generation", "is_quality_control_question", "is_initial_screening_question",
                "question", "label", "problem", "answer", "solution", "subject", "level", "unique_id", "problem_id",
                "steps", "verifier_score", "sample_index", "gold_first_error", "is_quality_control", "is_screening",
                "provenance", "generator"}
PRM_KEYS = ["labeler", "timestamp", "generation", "is_quality_control_question", "is_initial_screening_question",
            "question", "label"]


def _prm_like() -> st.SearchStrategy[object]:
    completion = st.fixed_dictionaries({"text": JSON | st.text(max_size=20),
                                        "rating": JSON | st.sampled_from([-1, 0, 1, None]),
                                        "flagged": JSON | st.none()})
    step = st.fixed_dictionaries({"completions": st.lists(completion, max_size=3) | JSON,
                                  "human_completion": JSON, "chosen_completion": st.integers(-2, 4) | JSON})
    label = st.fixed_dictionaries({"steps": st.lists(step, max_size=3) | JSON, "total_time": JSON,
                                   "finish_reason": (st.sampled_from(["solution", "found_error", "give_up", "x"])
                                                     | JSON)})
    question = st.fixed_dictionaries({"problem": st.text(max_size=20) | JSON, "ground_truth_answer": JSON})
    return st.fixed_dictionaries({"question": question | JSON, "label": label | JSON},
                                 optional={k: JSON for k in PRM_KEYS[:5]}) | JSON


def _accepts_or_names_field(parse, value) -> None:
    try:
        parse(value)
    except RowError as error:
        assert str(error)
        if isinstance(value, dict):  # a JSON object is always rejected for a named field of the schema
            root = error.field.split(".")[0].split("[")[0]
            assert root in KNOWN_FIELDS, f"{error!s} names no known field"


@hyp_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_prm_like())
def test_prm800k_rows(value) -> None:
    _accepts_or_names_field(parse_row, value)


@hyp_settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["problem", "answer", "solution", "subject", "level", "unique_id"]), JSON)
       | JSON)
def test_problem_rows(value) -> None:
    _accepts_or_names_field(parse_problem, value)


@hyp_settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["problem", "problem_id", "solution", "steps", "answer", "verifier_score",
                                        "sample_index", "generation", "gold_first_error", "is_quality_control",
                                        "provenance"]), JSON | st.lists(st.text(max_size=5), max_size=3)) | JSON)
def test_solution_rows(value) -> None:
    _accepts_or_names_field(make_solution_parser("auto"), value)


# --- valid rows, and invalid ones made from them -------------------------------------------------------------
# A parser that accepted everything would pass the tests above; these know which lines are valid. Each invalid
# line is a valid row with one mutation whose field is known, so the import must reject exactly those lines,
# naming file, line and field, and accept every other.

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20)  # storable: no NUL, no surrogate
WORDS = TEXT.map(lambda text: f"w {text}")  # never blank
_DROP = object()  # a value for _set: remove the key
Mutation = Callable[[dict[str, Any], st.DrawFn], tuple[Any, str]]


def _set(row: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A deep copy of ``row`` with the value at ``path`` replaced (``_DROP``: removed)."""
    row = copy.deepcopy(row)
    *parents, last = path
    target = row
    for key in parents:
        target = target[key]
    if value is _DROP:
        del target[last]
    else:
        target[last] = value
    return row



@st.composite
def _valid_problem(draw: st.DrawFn) -> dict[str, Any]:
    row: dict[str, Any] = {"problem": draw(WORDS)}
    optional = {"answer": TEXT, "solution": TEXT, "subject": TEXT, "unique_id": TEXT,
                "level": st.integers(1, 5) | st.sampled_from(["Level 3", "level 5", "Level ?", "4"])}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            row[key] = draw(strategy)
    return row


PROBLEM_MUTATIONS: list[Mutation] = [
    lambda row, draw: (_set(row, ["problem"], _DROP), "problem"),
    lambda row, draw: (_set(row, ["problem"], draw(st.sampled_from(["", "   ", 7, ["p"], {"p": 1}, True]))),
                       "problem"),
    lambda row, draw: (_set(row, ["answer"], draw(st.sampled_from([7, 1.5, ["2"], False]))), "answer"),
    lambda row, draw: (_set(row, ["level"], draw(st.sampled_from(["hard", "Level", True, 2.5, [3]]))), "level"),
    lambda row, draw: (_set(row, ["unique_id"], "u" * 201), "unique_id"),
    lambda row, draw: (_set(row, ["subject"], "s" * 101), "subject"),
    lambda row, draw: ([row], ""),  # not an object
]


@st.composite
def _valid_solution(draw: st.DrawFn) -> dict[str, Any]:
    steps = draw(st.lists(WORDS | st.lists(WORDS, min_size=1, max_size=3), min_size=1, max_size=4))
    row: dict[str, Any] = draw(st.sampled_from([{"problem_id": "p-1"}, {"problem": "What is 1+1?"},
                                                {"problem_id": "p-2", "problem": "What is 2+2?"}]))
    row["steps"] = steps
    optional = {"answer": TEXT, "verifier_score": st.floats(-10, 10, allow_nan=False) | st.integers(-3, 3),
                "sample_index": st.integers(0, 100), "generation": st.integers(-1, 5),
                "gold_first_error": st.integers(-1, len(steps) - 1), "is_quality_control": st.booleans(),
                "is_screening": st.booleans(), "provenance": st.dictionaries(WORDS, TEXT, max_size=2),
                "generator": TEXT}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            row[key] = draw(strategy)
    return row


def _bad_step(row: dict[str, Any], draw: st.DrawFn) -> tuple[Any, str]:
    index = draw(st.integers(0, len(row["steps"]) - 1))
    return _set(row, ["steps", index], draw(st.sampled_from(["", "  ", 5, [], ["a", ""]]))), f"steps[{index}]"


def _bad_value(row: dict[str, Any], draw: st.DrawFn, keys: list[str], values: list[Any]) -> tuple[Any, str]:
    """One of the top-level ``keys`` set to one of ``values``."""
    key = draw(st.sampled_from(keys))
    return _set(row, [key], draw(st.sampled_from(values))), key


SOLUTION_MUTATIONS: list[Mutation] = [
    lambda row, draw: (_set(_set(row, ["problem_id"], None), ["problem"], None), "problem_id"),
    # an integer is a unique id too (MMLU-Pro's question_id): the wrong shapes are these
    lambda row, draw: (_set(row, ["problem_id"], draw(st.sampled_from([5.5, ["p"], True]))), "problem_id"),
    lambda row, draw: (_set(row, ["answer"], draw(st.sampled_from([5, ["4"], {}]))), "answer"),
    lambda row, draw: (_set(row, ["steps"], draw(st.sampled_from([[], "one step", {"0": "a"}, 3]))), "steps"),
    _bad_step,
    lambda row, draw: (_set(row, ["steps"], _DROP), "solution"),
    lambda row, draw: (_set(row, ["verifier_score"], draw(st.sampled_from(["high", True, [1.0]]))),
                       "verifier_score"),
    lambda row, draw: _bad_value(row, draw, ["sample_index", "generation", "gold_first_error"], [1.5, "3", True]),
    lambda row, draw: (_set(row, ["gold_first_error"], draw(st.sampled_from([len(row["steps"]), -2]))),
                       "gold_first_error"),
    lambda row, draw: _bad_value(row, draw, ["is_quality_control", "is_screening"], [1, "yes", None]),
    lambda row, draw: (_set(row, ["provenance"], draw(st.sampled_from([[], "x", 1]))), "provenance"),
    lambda row, draw: ("just text", ""),  # not an object
]


@st.composite
def _valid_prm800k(draw: st.DrawFn) -> dict[str, Any]:
    """A stepwise pass: one completion per step, rated 0 or +1, the last one possibly −1 (stop at first error)."""
    ratings = draw(st.lists(st.sampled_from([0, 1]), max_size=4)) + draw(st.sampled_from([[], [-1]]))
    steps = [{"completions": [{"text": draw(TEXT), "rating": rating, "flagged": draw(st.none() | st.booleans())}],
              "human_completion": None, "chosen_completion": draw(st.sampled_from([None, 0]))} for rating in ratings]
    label = {"steps": steps, "total_time": draw(st.none() | st.integers(0, 10**9)),
             "finish_reason": draw(st.sampled_from([None, "solution", "found_error", "give_up"]))}
    question = {"problem": draw(WORDS), "ground_truth_answer": draw(st.none() | TEXT)}
    row: dict[str, Any] = {"question": question, "label": label}
    optional = {"labeler": st.none() | TEXT, "timestamp": st.none() | TEXT, "generation": st.integers(-1, 10),
                "is_quality_control_question": st.booleans(), "is_initial_screening_question": st.booleans()}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            row[key] = draw(strategy)
    return row


def _prm_step(row: dict[str, Any], draw: st.DrawFn) -> int | None:
    steps = row["label"]["steps"]
    return draw(st.integers(0, len(steps) - 1)) if steps else None


def _mutate_step(row: dict[str, Any], draw: st.DrawFn, path: list[Any], values: list[Any],
                 field: str) -> tuple[Any, str]:
    """Mutate ``label.steps[i]`` at ``path``; a row without steps gets an invalid ``label.steps`` instead."""
    index = _prm_step(row, draw)
    if index is None:
        return _set(row, ["label", "steps"], "no steps"), "label.steps"
    return _set(row, ["label", "steps", index, *path], draw(st.sampled_from(values))), \
        f"label.steps[{index}]{field}"


PRM800K_MUTATIONS: list[Mutation] = [
    lambda row, draw: _bad_value(row, draw, ["question", "label"], [_DROP]),
    lambda row, draw: (_set(row, ["question", "problem"], draw(st.sampled_from([_DROP, 7, None]))),
                       "question.problem"),
    lambda row, draw: (_set(row, ["question", "problem"], "  "), "question.problem"),
    lambda row, draw: (_set(row, ["label", "steps"], draw(st.sampled_from([_DROP, "x", {}]))), "label.steps"),
    lambda row, draw: (_set(row, ["label", "finish_reason"], draw(st.sampled_from(["x", 1]))),
                       "label.finish_reason"),
    lambda row, draw: (_set(row, ["label", "total_time"], draw(st.sampled_from([-1, 2**63, "1", 1.5]))),
                       "label.total_time"),
    lambda row, draw: (_set(row, ["generation"], draw(st.sampled_from([2**31, -2**31 - 1, "1", 1.5]))),
                       "generation"),
    lambda row, draw: (_set(row, ["timestamp"], draw(st.sampled_from(["t" * 65, 5]))), "timestamp"),
    lambda row, draw: (_set(row, ["is_quality_control_question"], draw(st.sampled_from([None, 1, "no"]))),
                       "is_quality_control_question"),
    lambda row, draw: _mutate_step(row, draw, ["extra"], [1, None], ".extra"),
    lambda row, draw: _mutate_step(row, draw, ["human_completion"], [_DROP, 5, [1]], ".human_completion"),
    lambda row, draw: _mutate_step(row, draw, ["chosen_completion"], [1, -1, "0"], ".chosen_completion"),
    lambda row, draw: _mutate_step(row, draw, ["completions", 0, "flagged"], [_DROP, 1, "yes"],
                                   ".completions[0].flagged"),
    lambda row, draw: _mutate_step(row, draw, ["completions", 0, "rating"], [2, -2, 0.5, "1", True, _DROP],
                                   ".completions[0].rating"),
    lambda row, draw: _mutate_step(row, draw, ["completions", 0, "text"], [_DROP, 3, None],
                                   ".completions[0].text"),
    lambda row, draw: (7, ""),  # not an object
]


def _lines(valid: st.SearchStrategy[dict[str, Any]], mutations: list[Mutation]) -> st.SearchStrategy[Any]:
    """Lists of (row, None) for a valid row, or (row, field) for an invalid one that must be rejected at field."""

    @st.composite
    def line(draw: st.DrawFn) -> tuple[Any, str | None]:
        row = draw(valid)
        if draw(st.booleans()):
            return row, None
        mutate = draw(st.sampled_from(mutations))
        return mutate(row, draw)

    return st.lists(line(), min_size=1, max_size=6)


def _rejects_exactly_the_invalid_lines(tmp_path_factory: pytest.TempPathFactory, parse: Callable[[Any], Any],
                                       lines: list[tuple[Any, str | None]]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row, _ in lines), encoding="utf-8")
    report = ImportReport(file="rows.jsonl")
    valid = validate_file(path, parse, report)
    expected = [(number, field) for number, (_, field) in enumerate(lines, start=1) if field is not None]
    assert [(item.line, item.field) for item in report.rejected] == expected, [str(r) for r in report.rejected]
    assert valid == len(lines) - len(expected)
    for item in report.rejected:
        named = f"rows.jsonl:{item.line}: " + (f"field '{item.field}': " if item.field else "")
        assert str(item).startswith(named) and item.message, str(item)


@hyp_settings(max_examples=200, deadline=None)
@given(lines=_lines(_valid_problem(), PROBLEM_MUTATIONS))
def test_problem_files_reject_exactly_the_invalid_lines(tmp_path_factory, lines) -> None:
    _rejects_exactly_the_invalid_lines(tmp_path_factory, parse_problem, lines)


@hyp_settings(max_examples=200, deadline=None)
@given(lines=_lines(_valid_solution(), SOLUTION_MUTATIONS))
def test_solution_files_reject_exactly_the_invalid_lines(tmp_path_factory, lines) -> None:
    _rejects_exactly_the_invalid_lines(tmp_path_factory, make_solution_parser("auto"), lines)


@hyp_settings(max_examples=300, deadline=None)
@given(lines=_lines(_valid_prm800k(), PRM800K_MUTATIONS))
def test_prm800k_files_reject_exactly_the_invalid_lines(tmp_path_factory, lines) -> None:
    _rejects_exactly_the_invalid_lines(tmp_path_factory, parse_row, lines)


def _row_with_steps(count: int, text: str = "x") -> dict:
    return {"question": {"problem": "p"}, "label": {"finish_reason": "solution", "total_time": 1, "steps": [
        {"completions": [{"text": text, "rating": 1, "flagged": None}], "human_completion": None,
         "chosen_completion": None} for _ in range(count)]}}


def test_step_count_limit(settings) -> None:
    limit = settings.STEPLAB_MAX_STEPS_PER_SOLUTION
    assert len(parse_row(_row_with_steps(limit)).steps) == limit
    with pytest.raises(RowError, match=f"has {limit + 1} steps; the limit is {limit}"):
        parse_row(_row_with_steps(limit + 1))


def test_step_size_limit(settings) -> None:
    limit = settings.STEPLAB_MAX_STEP_CHARS
    assert parse_row(_row_with_steps(1, "a" * limit)).steps[0].completions[0].text == "a" * limit
    with pytest.raises(RowError, match="label.steps\\[0\\].completions\\[0\\].text.*longer than"):
        parse_row(_row_with_steps(1, "a" * (limit + 1)))


@pytest.mark.django_db(transaction=True)
def test_a_ten_thousand_step_solution_imports_and_exports(tmp_path: Path) -> None:
    from django.core.management import call_command

    from annotate.models import Rating

    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(_row_with_steps(10_000, "a step with $x^2$")) + "\n", encoding="utf-8")
    call_command("import_prm800k", str(path), "--campaign", "long")
    assert Rating.objects.count() == 10_000
    out = tmp_path / "out.jsonl"
    call_command("export_dataset", "--campaign", "long", "--format", "prm800k", "--out", str(out))
    assert json.loads(out.read_text()) == json.loads(path.read_text())


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda row: row.update(generation=10**30), "field 'generation': must be a 32-bit integer"),
    (lambda row: row["label"].update(total_time=2**63), "field 'label.total_time': must be between 0 and 2**63-1"),
    (lambda row: row["question"].update(pre_generated_verifier_score=float("nan")),
     "field 'question.pre_generated_verifier_score': must be a number or a string or null, got NaN"),
    (lambda row: row.update(timestamp="t" * 65), "field 'timestamp': is longer than 64 characters"),
    (lambda row: row["label"]["steps"][0].update(extra=1), "field 'label.steps[0].extra': is not a PRM800K key"),
    (lambda row: row["label"]["steps"][0]["completions"][0].pop("flagged"),
     "field 'label.steps[0].completions[0].flagged': is missing"),
])
def test_values_the_database_cannot_hold_are_named_row_errors(mutate, message: str) -> None:
    row = _row_with_steps(1)
    mutate(row)
    with pytest.raises(RowError) as raised:
        parse_row(row)
    assert str(raised.value).startswith(message)


@pytest.mark.django_db(transaction=True)
def test_nul_and_lone_surrogate_lines_are_rejected_by_line(tmp_path: Path) -> None:
    """JSON escapes can spell text PostgreSQL cannot store; the line is named, the valid lines still import."""
    from annotate.models import Campaign
    from annotate.services.prm800k_import import import_prm800k

    good = json.dumps(_row_with_steps(1, "emoji \U0001F600 is fine"))  # an escaped surrogate *pair*
    path = tmp_path / "escapes.jsonl"
    path.write_text("\n".join([good, good.replace("emoji", "nul \\u0000"), good.replace("emoji", "lone \\ud800")])
                    + "\n", encoding="utf-8")
    report = import_prm800k(path, Campaign.objects.create(slug="esc", name="esc"), skip_invalid=True)
    assert report.imported == 1
    assert [(r.line, r.message) for r in report.rejected] == [
        (2, "holds a NUL character (\\u0000), which no text column can store"),
        (3, "holds a lone UTF-16 surrogate, which no text column can store")]


@hyp_settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=40),
    st.builds(lambda depth, opener: (opener * depth).encode(), st.integers(1, 60_000), st.sampled_from(["[", '{"a":'])),
    st.builds(lambda depth: ("[" * depth + "]" * depth).encode(), st.integers(1, 60_000)),
    JSON.map(lambda value: json.dumps(value).encode()),
), min_size=1, max_size=6))
def test_any_line_bytes_yield_a_value_or_a_line_error(tmp_path_factory, lines: list[bytes]) -> None:
    """Whatever the bytes of a line (deeply nested JSON included), the reader yields a value or a RowError for that
    line — never RecursionError or another exception — so an import names the line."""
    path = tmp_path_factory.mktemp("lines") / "rows.jsonl"
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    for number, value in iter_json_lines(path):
        assert 1 <= number <= len(lines)
        if isinstance(value, RowError):
            assert value.message


def test_a_deeply_nested_line_is_named_by_number(tmp_path: Path) -> None:
    from annotate.services.importing import ImportReport, validate_file

    path = tmp_path / "rows.jsonl"
    path.write_bytes(json.dumps(_row_with_steps(1)).encode() + b"\n" + b"[" * 50_000 + b"]" * 50_000 + b"\n"
                     + b'{"a":' * 65 + b"1" + b"}" * 65 + b"\n")
    report = ImportReport(file="rows.jsonl")
    assert validate_file(path, parse_row, report) == 1
    assert [(item.line, item.message) for item in report.rejected] == [
        (2, "not usable JSON (JSON nested more than 64 levels deep)"),
        (3, "not usable JSON (JSON nested more than 64 levels deep)")]
    assert str(report.rejected[0]).startswith("rows.jsonl:2")

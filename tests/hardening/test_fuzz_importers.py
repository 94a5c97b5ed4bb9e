"""Property-based bad input for every importer's row parser: a row is accepted or rejected naming a field —
never another exception. Then the size limits: 10,000 steps and 1 MB steps are accepted, one more is refused."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from annotate.prm800k import parse_row
from annotate.services.importing import RowError, iter_json_lines
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


def _accepts_or_names_field(parse, value) -> None:  # type: ignore[no-untyped-def]
    try:
        parse(value)
    except RowError as error:
        assert str(error)
        if isinstance(value, dict):  # a JSON object is always rejected for a named field of the schema
            root = error.field.split(".")[0].split("[")[0]
            assert root in KNOWN_FIELDS, f"{error!s} names no known field"


@hyp_settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_prm_like())
def test_prm800k_rows(value) -> None:  # type: ignore[no-untyped-def]
    _accepts_or_names_field(parse_row, value)


@hyp_settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["problem", "answer", "solution", "subject", "level", "unique_id"]), JSON)
       | JSON)
def test_problem_rows(value) -> None:  # type: ignore[no-untyped-def]
    _accepts_or_names_field(parse_problem, value)


@hyp_settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["problem", "problem_id", "solution", "steps", "answer", "verifier_score",
                                        "sample_index", "generation", "gold_first_error", "is_quality_control",
                                        "provenance"]), JSON | st.lists(st.text(max_size=5), max_size=3)) | JSON)
def test_solution_rows(value) -> None:  # type: ignore[no-untyped-def]
    _accepts_or_names_field(make_solution_parser("auto"), value)


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
def test_values_the_database_cannot_hold_are_named_row_errors(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    row = _row_with_steps(1)
    mutate(row)
    with pytest.raises(RowError) as raised:
        parse_row(row)
    assert str(raised.value).startswith(message)


@pytest.mark.django_db(transaction=True)
def test_nul_and_lone_surrogate_lines_are_rejected_by_line(tmp_path: Path) -> None:
    """JSON escapes can spell text PostgreSQL cannot store; the line is named, the valid lines still import."""
    from annotate.models import Campaign
    from annotate.prm800k import import_prm800k

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
def test_any_line_bytes_yield_a_value_or_a_line_error(tmp_path_factory, lines: list[bytes]) -> None:  # type: ignore[no-untyped-def]
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

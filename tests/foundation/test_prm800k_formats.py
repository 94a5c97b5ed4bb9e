"""Real PRM800K rows in and out through the management commands, on PostgreSQL."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Assignment, Campaign, Completion, Problem, Rating, Solution, Step

pytestmark = pytest.mark.django_db(transaction=True)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_genuine_rows_round_trip_losslessly(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "prm800k" / "genuine_rows.jsonl"
    call_command("import_prm800k", str(source), "--campaign", "rt")
    out = tmp_path / "out.jsonl"
    call_command("export_dataset", "--campaign", "rt", "--format", "prm800k", "--out", str(out))
    original, exported = _rows(source), _rows(out)
    assert len(exported) == len(original) == 10
    for number, (want, got) in enumerate(zip(original, exported, strict=True), start=1):
        assert got == want, f"row {number} differs after the round trip"


def test_import_stores_steps_as_rows_and_users_for_labelers(shared_data: Path) -> None:
    source = shared_data / "prm800k" / "genuine_rows.jsonl"
    call_command("import_prm800k", str(source), "--campaign", "rows")
    rows = _rows(source)
    campaign = Campaign.objects.get(slug="rows")
    assert Assignment.objects.filter(solution__campaign=campaign).count() == len(rows)
    assert Step.objects.filter(solution__campaign=campaign).count() == sum(len(r["label"]["steps"]) for r in rows)
    assert Completion.objects.filter(step__solution__campaign=campaign).count() == sum(
        len(s["completions"]) for r in rows for s in r["label"]["steps"])
    rated = sum(1 for r in rows for s in r["label"]["steps"] for c in s["completions"] if c["rating"] is not None)
    assert Rating.objects.filter(assignment__solution__campaign=campaign, rating__isnull=False).count() == rated
    from django.contrib.auth import get_user_model

    labelers = {r["labeler"] for r in rows if r["labeler"]}
    users = get_user_model().objects.filter(username__in=[f"imported:{name}" for name in labelers])
    assert users.count() == len(labelers) and not users.filter(is_active=True).exists()
    assert not get_user_model().objects.filter(username__in=labelers).exists()  # their own namespace


def test_reconstructed_phase1_rows_import(shared_data: Path) -> None:
    """The reconstruction's inferred `give_up_or_unknown` is not a PRM800K reason: rejected, line by line."""
    source = shared_data / "prm800k" / "phase1_test_reconstructed.jsonl"
    with pytest.raises(CommandError, match="invalid line"):
        call_command("import_prm800k", str(source), "--campaign", "p1")
    assert not Solution.objects.exists()
    call_command("import_prm800k", str(source), "--campaign", "p1", "--skip-invalid")
    kept = sum(1 for r in _rows(source) if r["label"]["finish_reason"] != "give_up_or_unknown")
    assert Assignment.objects.filter(solution__campaign__slug="p1").count() == kept


def _good_row(shared_data: Path) -> dict:
    return _rows(shared_data / "prm800k" / "genuine_rows.jsonl")[0]


def _mutations() -> list[tuple[str, object, str]]:
    def drop_label(row: dict) -> None:
        del row["label"]

    def bad_rating(row: dict) -> None:
        row["label"]["steps"][0]["completions"][0]["rating"] = 2

    def bad_chosen(row: dict) -> None:
        step = row["label"]["steps"][0]
        step["chosen_completion"] = len(step["completions"]) + 3

    def wrong_type(row: dict) -> None:
        row["generation"] = "two"

    def bad_reason(row: dict) -> None:
        row["label"]["finish_reason"] = "tired"

    def text_not_string(row: dict) -> None:
        row["label"]["steps"][1]["completions"][0]["text"] = 12

    return [
        ("missing field", drop_label, "field 'label': is missing"),
        ("rating outside -1..1", bad_rating,
         "field 'label.steps[0].completions[0].rating': must be -1, 0, 1 or null, got 2"),
        ("chosen_completion out of range", bad_chosen, "field 'label.steps[0].chosen_completion': is"),
        ("wrong type", wrong_type, "field 'generation': must be an integer"),
        ("unknown finish reason", bad_reason, "field 'label.finish_reason': must be one of"),
        ("text not a string", text_not_string, "field 'label.steps[1].completions[0].text': must be a string"),
    ]


@pytest.mark.parametrize(("name", "mutate", "message"), _mutations(), ids=[m[0] for m in _mutations()])
def test_each_bad_prm800k_input_names_file_line_field_and_imports_nothing(
        shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, mutate, message: str) -> None:
    good = _good_row(shared_data)
    bad = json.loads(json.dumps(good))
    mutate(bad)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match="1 invalid line"):
        call_command("import_prm800k", str(path), "--campaign", "bad")
    err = capsys.readouterr().err
    assert f"{path}:2: {message}" in err
    assert not Solution.objects.exists() and not Rating.objects.exists()


def test_malformed_json_line_is_reported_and_skip_invalid_keeps_the_rest(
        shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _good_row(shared_data)
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(good) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CommandError):
        call_command("import_prm800k", str(path), "--campaign", "mixed")
    assert f"{path}:2:" in capsys.readouterr().err
    assert not Assignment.objects.exists()
    call_command("import_prm800k", str(path), "--campaign", "mixed", "--skip-invalid")
    captured = capsys.readouterr()
    assert "imported 1 of 2 line(s)" in captured.out and "skipped" in captured.err
    assert Assignment.objects.count() == 1


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_prm800k", str(tmp_path / "nope.jsonl"), "--campaign", "x")


def test_problems_then_solutions_are_split_and_graded(shared_data: Path, tmp_path: Path) -> None:
    call_command("import_problems", str(shared_data / "math" / "math500.jsonl"))
    assert Problem.objects.count() == 500
    first = json.loads((shared_data / "math" / "math500.jsonl").read_text().splitlines()[0])
    Campaign.objects.create(slug="gen", name="gen")
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(s) for s in [
        {"problem_id": first["unique_id"], "solution": f"Step one.\nStep two.\n\n# Answer\n\n{first['answer']}"},
        {"problem_id": first["unique_id"], "steps": ["Guess.", "# Answer\n\n12345"]},
        {"problem": first["problem"], "solution": "Therefore the answer is $\\boxed{" + first["answer"] + "}$."},
    ]) + "\n", encoding="utf-8")
    call_command("import_solutions", str(samples), "--campaign", "gen")
    solutions = list(Solution.objects.filter(campaign__slug="gen").order_by("pk"))
    assert [s.is_correct for s in solutions] == [True, False, True]
    assert [s.steps.count() for s in solutions] == [3, 2, 1]


def test_unknown_problem_rejects_the_whole_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Campaign.objects.create(slug="u", name="u")
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"problem_id": "test/none/1.json", "solution": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(CommandError):
        call_command("import_solutions", str(samples), "--campaign", "u")
    assert "s.jsonl:1: field 'problem_id': 'test/none/1.json' is not a known problem" in capsys.readouterr().err
    assert not Solution.objects.exists()

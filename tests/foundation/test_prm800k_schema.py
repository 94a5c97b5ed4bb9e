"""The PRM800K schema written once in ``annotate.prm800k``: rows of every accepted shape, generated from those
tables, import and export back byte for byte (as ``json.dumps`` writes them); the genuine shapes the release
holds (a step whose completions are null, float ratings, null finish reasons); QC and screening rows in the
prm800k export by default; imported labelers in their own namespace; the campaign mode the rows imply."""
from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from annotate.models import Assignment, Campaign, CampaignMode, FinishReason
from annotate.prm800k import (
    COMPLETION_SCHEMA,
    FINISH_REASONS,
    HUMAN_COMPLETION_SCHEMA,
    LABEL_SCHEMA,
    QUESTION_SCHEMA,
    ROW_SCHEMA,
    STEP_SCHEMA,
    Field,
)
from annotate.prm800k.export import iter_prm800k_rows
from annotate.services.prm800k_import import import_prm800k
from rewards.exports import ExportOptions, iter_format_rows, labeled_assignments
from tests.factories import CampaignFactory

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
PROBLEMS = st.sampled_from(["What is $1+1$?", "  What is $1+1$?\n", "What  is\t$1+1$?", "Find $x$."]) | TEXT.filter(
    str.strip)
ANSWERS = st.sampled_from(["2", "\\frac{1}{2}", "x", ""])
SLUGS = itertools.count()


def _shape(shape: str, name: str) -> st.SearchStrategy[Any]:
    """Values of one schema shape; a few fields get the ranges and vocabularies the schema states."""
    if shape == "null":
        return st.none()
    if shape == "bool":
        return st.booleans()
    if shape == "rating":
        return st.sampled_from([-1, 0, 1, -1.0, 0.0, 1.0])
    if shape == "finish_reason":
        return st.sampled_from(FINISH_REASONS)
    if shape == "int":
        return {"generation": st.integers(-2**31, 2**31 - 1), "total_time": st.integers(0, 2**63 - 1)}.get(
            name, st.integers(-10, 10))
    if shape == "number":
        return st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    if shape == "string":
        return {"problem": PROBLEMS, "ground_truth_answer": ANSWERS, "pre_generated_answer": ANSWERS,
                "labeler": st.sampled_from(["admin", "labeler", "", "x" * 200]) | TEXT,
                "timestamp": st.sampled_from(["2022-07-17T16:56:51.323252", "", "not a time"]) | TEXT}.get(name, TEXT)
    if shape == "list":  # pre_generated_steps (the only list besides steps/completions, drawn below)
        return st.lists(TEXT, max_size=3)
    raise AssertionError(f"no strategy for {shape}")


def _field(name: str, field: Field) -> st.SearchStrategy[Any]:
    return st.one_of(*[_shape(shape, name) for shape in field.shapes if shape != "object"])


def _object(schema: dict[str, Field], **drawn: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Required keys always, optional ones present or absent, in the schema's order."""
    strategies = {name: drawn[name] if name in drawn else _field(name, field) for name, field in schema.items()}
    required = {k: v for k, v in strategies.items() if schema[k].required}
    optional = {k: v for k, v in strategies.items() if not schema[k].required}
    return st.fixed_dictionaries(required, optional=optional).map(
        lambda value: {k: value[k] for k in schema if k in value})


# A rationale as the workspace stores and the exporter writes it: one stripped, non-empty line, on a −1 only.
RATIONALES = TEXT.filter(lambda text: bool(text) and text == text.strip() and not {"\n", "\r"} & set(text))


@st.composite
def _step(draw: st.DrawFn) -> dict[str, Any]:
    completions = draw(st.none() | st.lists(_object(COMPLETION_SCHEMA), max_size=3))
    for completion in completions or ():
        completion.pop("rationale", None)
        if completion["rating"] == -1 and draw(st.booleans()):
            completion["rationale"] = draw(RATIONALES)
    human = draw(st.none() | TEXT | _object(HUMAN_COMPLETION_SCHEMA))
    chosen = draw(st.none() | st.integers(0, len(completions) - 1)) if completions else None
    return draw(_object(STEP_SCHEMA, completions=st.just(completions), human_completion=st.just(human),
                        chosen_completion=st.just(chosen)))


def _stop_at_first_error(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stepwise-shaped pass (one completion per step, none written by the labeler) as a labeler could have
    given it: once a step is unrated or −1, the later steps are unrated (the importer refuses anything else)."""
    steps = copy.deepcopy(steps)
    if any(len(step["completions"] or ()) > 1 or step.get("human_completion") is not None for step in steps):
        return steps
    closed = False
    for step in steps:
        completion = step["completions"][0] if step["completions"] else None
        if closed and completion is not None and completion.get("rating") is not None:
            completion["rating"] = None
            completion.pop("rationale", None)  # a rationale goes with a −1 only
        rating = completion.get("rating") if completion is not None else None
        closed = closed or rating is None or rating == -1
    return steps


def _row() -> st.SearchStrategy[dict[str, Any]]:
    label = _object(LABEL_SCHEMA, steps=st.lists(_step(), max_size=4).map(_stop_at_first_error))
    question = _object(QUESTION_SCHEMA)
    row = _object(ROW_SCHEMA, question=question, label=label)
    # Keys the schema does not model (the reconstructed files carry `_derived`) are kept as they came.
    extra = st.dictionaries(st.sampled_from(["_derived", "note"]),
                            st.dictionaries(TEXT, st.none() | TEXT | st.integers(), max_size=3), max_size=1)
    return st.tuples(row, extra).map(lambda pair: {**pair[0], **pair[1]})


def _write(tmp_path: Path, rows: list[dict[str, Any]], name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _export(campaign: Campaign) -> list[dict[str, Any]]:
    return list(iter_prm800k_rows(labeled_assignments(campaign, ExportOptions(), all_finished=True)))


@pytest.mark.django_db
@hyp_settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row(), min_size=1, max_size=4))
def test_rows_of_every_shape_round_trip_byte_for_byte(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    campaign = CampaignFactory(slug=f"shape-{next(SLUGS)}", name="shapes")
    report = import_prm800k(_write(tmp_path, rows), campaign)
    assert report.imported == len(rows)
    exported = _export(campaign)
    assert [json.dumps(row) for row in exported] == [json.dumps(row) for row in rows]


def _genuine(shared_data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (shared_data / "prm800k" / "genuine_rows.jsonl").open(encoding="utf-8")]


@pytest.mark.django_db
def test_a_give_up_step_with_null_completions_round_trips(shared_data: Path, tmp_path: Path) -> None:
    """The shape that made import_prm800k reject a whole genuine file: completions, human_completion and
    chosen_completion all null at the end of a phase-1 give_up."""
    row = next(r for r in _genuine(shared_data) if r["label"]["finish_reason"] == "give_up")
    row["label"]["steps"].append({"completions": None, "human_completion": None, "chosen_completion": None})
    line = json.dumps(row)
    campaign = CampaignFactory(slug="nulls", name="nulls")
    import_prm800k(_write(tmp_path, [row]), campaign)
    assert [json.dumps(r) for r in _export(campaign)] == [line]


@pytest.mark.django_db
def test_float_ratings_and_null_finish_reason_keep_their_form(shared_data: Path, tmp_path: Path) -> None:
    row = _genuine(shared_data)[2]
    for step in row["label"]["steps"]:
        for completion in step["completions"]:
            if completion["rating"] is not None:
                completion["rating"] = float(completion["rating"])
    row["label"]["finish_reason"] = None
    campaign = CampaignFactory(slug="floats", name="floats")
    import_prm800k(_write(tmp_path, [row]), campaign)
    assert json.dumps(_export(campaign)[0]) == json.dumps(row)
    # A pass with no finish reason is no labeled data: the training formats leave it out.
    assert Assignment.objects.get(solution__campaign=campaign).finish_reason == FinishReason.GIVE_UP


@pytest.mark.django_db
def test_prm800k_export_writes_qc_and_screening_rows_by_default(shared_data: Path, tmp_path: Path) -> None:
    rows = _genuine(shared_data)[2:6]
    rows[0]["is_quality_control_question"] = True
    rows[1]["is_initial_screening_question"] = True
    rows[1]["generation"] = -1
    campaign = CampaignFactory(slug="release", name="release")
    import_prm800k(_write(tmp_path, rows), campaign)
    out = tmp_path / "out.jsonl"
    call_command("export_dataset", "--campaign", "release", "--format", "prm800k", "--out", str(out))
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
    call_command("export_dataset", "--campaign", "release", "--format", "prm800k", "--out", str(out), "--exclude-qc")
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows[2:]
    # Training formats keep leaving them out unless asked.
    stepwise = {r["solution_id"] for r in iter_format_rows(campaign, "trl-stepwise", ExportOptions())}
    flagged = set(campaign.solutions.filter(is_quality_control=True).values_list("pk", flat=True)) | set(
        campaign.solutions.filter(is_screening=True).values_list("pk", flat=True))
    assert len(flagged) == 2 and not stepwise & flagged


@pytest.mark.django_db
def test_an_imported_admin_labeler_is_not_the_admin_account(shared_data: Path, tmp_path: Path,
                                                            make_user) -> None:
    staff = make_user("admin", is_staff=True, is_superuser=True)
    rows = _genuine(shared_data)[2:4]
    rows[0]["labeler"] = "admin"
    campaign = CampaignFactory(slug="names", name="names")
    import_prm800k(_write(tmp_path, rows), campaign)
    first = Assignment.objects.filter(solution__campaign=campaign).order_by("pk").first()
    assert first is not None and first.labeler_id != staff.pk
    assert not staff.assignments.exists()
    imported = get_user_model().objects.get(pk=first.labeler_id)
    assert imported.username == "imported:admin" and not imported.is_active and not imported.has_usable_password()
    assert _export(campaign)[0]["labeler"] == "admin"  # export writes the original string


@pytest.mark.django_db
def test_a_created_campaign_takes_the_mode_its_rows_imply(shared_data: Path, tmp_path: Path) -> None:
    rows = _genuine(shared_data)
    phase1 = [r for r in rows if r["question"].get("pre_generated_steps") is None]
    phase2 = [r for r in rows if r["question"].get("pre_generated_steps") is not None]
    call_command("import_prm800k", str(_write(tmp_path, phase1, "p1.jsonl")), "--campaign", "p1")
    call_command("import_prm800k", str(_write(tmp_path, phase2, "p2.jsonl")), "--campaign", "p2")
    call_command("import_prm800k", str(_write(tmp_path, phase1, "p1.jsonl")), "--campaign", "forced",
                 "--mode", "stepwise")
    modes = dict(Campaign.objects.values_list("slug", "mode"))
    assert modes == {"p1": CampaignMode.CONVERSATIONAL, "p2": CampaignMode.STEPWISE, "forced": CampaignMode.STEPWISE}

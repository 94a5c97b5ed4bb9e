"""Label-source kinds as a registry: a kind registered by one module is recorded, read as a hard label, shown,
counted in agreement and in the consensus like the built-in ones; the judge's ``llm`` kind in the first-error
consensus beside Monte-Carlo labels."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import CharField

from annotate import labelsources
from annotate.labelsources import LabelSource
from annotate.models import MachineLabel, SuggestionMode
from annotate.services.agreement import load_labelings, machine_agreement
from annotate.services.machine_labels import StepValue, record_machine_labels
from annotate.services.suggestions import step_suggestions
from rewards.consensus import FIRST_ERROR, PREFIX, ConsensusCounts, iter_consensus_rows
from rewards.exports import ExportOptions
from tests.factories import finished_labeling, numbered_solution

pytestmark = pytest.mark.django_db


def kind_choices() -> dict[str, str]:
    """``MachineLabel.kind``'s choices as the model field offers them (forms, admin, validation)."""
    field = MachineLabel._meta.get_field("kind")
    assert isinstance(field, CharField)
    return {str(name): str(label) for name, label in field.choices or []}


@pytest.fixture
def foreign_kind() -> Iterator[LabelSource]:
    """A kind from a module of its own: a vote share that calls a step correct only from 0.8."""
    kind = labelsources.register(LabelSource(name="votes", label="Share of a committee's votes", correct_from=0.8))
    yield kind
    labelsources.unregister("votes")


def test_the_built_in_kinds_keep_their_stored_values_and_readings() -> None:
    assert {"mc", "prm", "import", "llm"} <= set(labelsources.names())
    assert kind_choices()["llm"].startswith("An LLM judge")
    assert not labelsources.says_correct("mc", 0.0) and labelsources.says_correct("mc", 0.01)
    assert labelsources.says_correct("prm", 0.5) and not labelsources.says_correct("llm", 0.0)
    assert labelsources.uncertainty("mc", 0.5) == 1.0 and labelsources.uncertainty("llm", 0.5) == 0.0


def test_a_kind_is_refused_until_a_module_registers_it(campaign_factory) -> None:
    solution = numbered_solution(campaign_factory(), 2)
    with pytest.raises(ValueError, match="kind must be one of .*got 'votes'"):
        record_machine_labels(labels={solution.pk: [StepValue(0, 1.0)]}, kind="votes", source="board")
    with pytest.raises(ValueError, match="1–8 characters"):
        labelsources.register(LabelSource(name="much-too-long", label="x"))
    with pytest.raises(ValueError, match="registered already"):
        labelsources.register(LabelSource(name="mc", label="again"))


def test_a_foreign_kind_is_read_by_every_reader(foreign_kind, campaign_factory, member, tmp_path) -> None:
    campaign = campaign_factory(suggestions=SuggestionMode.SHOWN)
    solution = numbered_solution(campaign, 3)
    finished_labeling(solution, member(campaign, "ann"), [1, -1])
    assert kind_choices()["votes"] == "Share of a committee's votes"
    # 0.7 is a wrong step for this kind (correct from 0.8), a correct one for a PRM
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.9), StepValue(1, 0.7)]}, kind="votes", source="board")
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.9), StepValue(1, 0.7)]}, kind="prm", source="p")
    assert MachineLabel.objects.get(kind="votes", step__index=1).says_correct is False
    solution.refresh_from_db()
    assert solution.machine_disagreement == 1.0  # the two sources' first errors differ: 1 and none
    shown = step_suggestions(campaign, solution)
    assert sorted(label.source_key for label in shown[1]) == ["prm:p", "votes:board"]
    figures = machine_agreement(load_labelings(campaign).labelings, campaign)
    assert figures["votes:board"]["first_error_agreement"]["value"] == 1.0
    assert figures["prm:p"]["first_error_agreement"]["value"] == 0.0
    out = tmp_path / "c.jsonl"
    call_command("export_dataset", campaign=campaign.slug, format="consensus", out=out, sources="human,votes:board")
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["labels"] == [True, False]
    labelsources.unregister("votes")
    assert sorted(label.source_key for label in step_suggestions(campaign, solution)[1]) == ["prm:p"]


def test_first_error_consensus_keeps_whole_solutions_where_the_judge_and_rollouts_agree(
        campaign_factory, member) -> None:
    campaign = campaign_factory()
    agree, differ, no_error = (numbered_solution(campaign, 4) for _ in range(3))
    ann = member(campaign, "ann")
    finished_labeling(agree, ann, [1, 1, -1])
    judge = "llm", "smollm2@processbench-v1"
    for solution, first in ((agree, 2), (differ, 1), (no_error, -1)):
        values = [StepValue(i, 1.0, reason=None) for i in range(first if first >= 0 else 4)]
        if first >= 0:
            values.append(StepValue(first, 0.0, reason=f"step {first} is wrong"))
        record_machine_labels(labels={solution.pk: values}, kind=judge[0], source=judge[1])
    record_machine_labels(labels={
        agree.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.5, 4), StepValue(2, 0.0, 4)],
        differ.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.25, 4), StepValue(2, 0.0, 4)],
        no_error.pk: [StepValue(i, 0.75, 4) for i in range(4)],
    }, kind="mc", source="smollm2")
    assert MachineLabel.objects.get(solution=agree, kind="llm", step__index=2).provenance["reason"] == "step 2 is wrong"
    sources = ["llm:" + judge[1], "mc:smollm2"]
    counts = ConsensusCounts()
    rows = list(iter_consensus_rows(campaign, ExportOptions(), sources, counts, rule=FIRST_ERROR))
    assert [(row["solution_id"], row["labels"]) for row in rows] == [
        (agree.pk, [True, True, False]), (no_error.pk, [True, True, True, True])]
    # the prefix rule keeps differ's first step, where both call it correct
    prefix = [(row["solution_id"], row["labels"]) for row in
              iter_consensus_rows(campaign, ExportOptions(), sources, rule=PREFIX)]
    assert prefix == [(agree.pk, [True, True, False]), (differ.pk, [True]), (no_error.pk, [True] * 4)]
    assert counts.as_dict()["rules"] == {
        "prefix": {"solutions": 3, "steps": 8, "steps_with_human": 3, "agreement_with_human": 1.0},
        "first_error": {"solutions": 2, "steps": 7, "steps_with_human": 3, "agreement_with_human": 1.0}}
    with pytest.raises(ValueError, match="unknown consensus rule"):
        list(iter_consensus_rows(campaign, ExportOptions(), sources, rule="majority"))


def test_the_first_error_consensus_is_a_dataset_format(campaign_factory, tmp_path: Path) -> None:
    campaign = campaign_factory()
    solution = numbered_solution(campaign, 2)
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.0)]}, kind="llm", source="m@v1")
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.0, 4)]}, kind="mc", source="m")
    out = tmp_path / "fe.jsonl"
    call_command("export_dataset", campaign=campaign.slug, format="consensus-first-error", out=out,
                 sources="llm:m@v1,mc:m")
    assert [json.loads(line)["labels"] for line in out.read_text().splitlines()] == [[False]]

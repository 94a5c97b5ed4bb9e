"""The consensus export: the steps on which the chosen sources agree, with hard and soft labels, and what a
dataset version and its card say of the sources."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from annotate.services.machine_labels import StepValue, record_machine_labels
from rewards.services.datasets import create_dataset_version
from tests.factories import finished_labeling, numbered_solution

pytestmark = pytest.mark.django_db


@pytest.fixture
def labeled(campaign_factory, member):
    campaign = campaign_factory()
    agree, torn, machine_only = (numbered_solution(campaign, 4) for _ in range(3))
    ann, bob = member(campaign, "ann"), member(campaign, "bob")
    finished_labeling(agree, ann, [1, 1, -1])
    finished_labeling(agree, bob, [1, 0, -1])
    finished_labeling(torn, ann, [-1])
    record_machine_labels(labels={
        agree.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.25, 4), StepValue(2, 0.0, 4), StepValue(3, 0.0, 4)],
        torn.pk: [StepValue(0, 0.5, 4), StepValue(1, 0.5, 4)],
        machine_only.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.0, 4)],
    }, kind="mc", source="smollm2")
    record_machine_labels(labels={machine_only.pk: [StepValue(0, 0.8), StepValue(1, 0.3), StepValue(2, 0.1)]},
                          kind="prm", source="p")
    return campaign, agree, torn, machine_only


def rows_of(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_consensus_rows_keep_the_agreeing_prefix_up_to_the_agreed_error(labeled, tmp_path) -> None:
    campaign, agree, torn, _ = labeled
    out = tmp_path / "consensus.jsonl"
    call_command("export_dataset", campaign=campaign.slug, format="consensus", out=out, sources="human,mc:smollm2")
    rows = rows_of(out)
    # torn: the human says step 1 is wrong, the Monte-Carlo estimate (0.5) says it can still be finished
    assert [row["solution_id"] for row in rows] == [agree.pk]
    row = rows[0]
    assert row["completions"] == [f"Step {i} of solution {agree.pk}." for i in (1, 2, 3)]
    assert row["labels"] == [True, True, False]
    # human: mean of ann's and bob's (+1/0/−1 -> 1/0.5/0); soft label: the mean over the sources
    assert row["label_sources"] == [{"human": 1.0, "mc:smollm2": 1.0}, {"human": 0.75, "mc:smollm2": 0.25},
                                    {"human": 0.0, "mc:smollm2": 0.0}]
    assert row["soft_labels"] == [1.0, 0.5, 0.0]
    assert set(row) == {"prompt", "completions", "labels", "soft_labels", "label_sources", "split", "problem_id",
                        "solution_id"}


def test_machine_sources_alone_and_unknown_sources(labeled, tmp_path) -> None:
    campaign, _, _, machine_only = labeled
    out = tmp_path / "machines.jsonl"
    call_command("export_dataset", campaign=campaign.slug, format="consensus", out=out, sources="mc:smollm2,prm:p")
    rows = rows_of(out)
    assert [(row["solution_id"], row["labels"]) for row in rows] == [(machine_only.pk, [True, False])]
    with pytest.raises(CommandError, match=r"unknown label source\(s\) mc:nope; this campaign has: human, "
                                           r"mc:smollm2, prm:p"):
        call_command("export_dataset", campaign=campaign.slug, format="consensus", out=out, sources="mc:nope,human")
    with pytest.raises(CommandError, match="at least two label sources"):
        call_command("export_dataset", campaign=campaign.slug, format="consensus", out=out, sources="human")


def test_a_dataset_version_carries_the_consensus_file_and_the_sources_counts(labeled) -> None:
    campaign, agree, _, machine_only = labeled
    version = create_dataset_version(campaign)
    assert version is not None
    consensus = version.counts["consensus"]
    # labeled by some source: agree 4, torn 2 (mc) + 1 (human), machine_only 3 -> 4 + 2 + 3 = 9; kept: agree 3
    # (human and mc), torn none (they disagree on step 1), machine_only 2 (mc and the PRM: right, then wrong)
    assert consensus == {"sources": ["human", "mc:smollm2", "prm:p"], "solutions": 3, "rows": 2,
                         "steps_labeled": 9, "steps_kept": 5, "share_kept": pytest.approx(5 / 9),
                         "per_source_steps": {"human": 4, "mc:smollm2": 8, "prm:p": 3}, "rule": "prefix",
                         "rules": {"prefix": {"solutions": 2, "steps": 5, "steps_with_human": 3,
                                              "agreement_with_human": 1.0},
                                   "first_error": {"solutions": 2, "steps": 5, "steps_with_human": 3,
                                                   "agreement_with_human": 1.0}}}
    with default_storage.open(version.files["consensus"]["name"]) as handle:
        rows = [json.loads(line) for line in handle.read().decode().splitlines()]
    assert [(row["solution_id"], row["labels"]) for row in rows] == [(agree.pk, [True, True, False]),
                                                                     (machine_only.pk, [True, False])]
    assert rows[1]["label_sources"] == [{"mc:smollm2": 1.0, "prm:p": 0.8}, {"mc:smollm2": 0.0, "prm:p": 0.3}]
    with default_storage.open(version.files["card"]["name"]) as handle:
        card = handle.read().decode()
    assert "## Label sources and consensus" in card
    assert "| `mc:smollm2` | 8 |" in card

"""Dataset versions: every format written, hashed, loadable by `datasets`, TRL's types, splits, no-change."""
from __future__ import annotations

import hashlib
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from annotate.models import Assignment, Membership, Role
from rewards.exports import ExportOptions
from rewards.models import DatasetVersion
from rewards.services.datasets import campaigns_due, create_dataset_version

from .conftest import label_everything

pytestmark = pytest.mark.django_db

DATA_FORMATS = {"prm800k": "json", "trl-stepwise": "json", "trl-stepwise-parquet": "parquet", "outcome": "json",
                "outcome-parquet": "parquet"}


def _load(path: Path, kind: str):
    import datasets

    return datasets.load_dataset(kind, data_files=str(path), split="train", cache_dir=str(path.parent / ".hf"))


def test_every_format_is_stored_hashed_and_loads_with_datasets(math500_campaign, storage_dirs) -> None:
    import datasets

    version = create_dataset_version(math500_campaign)
    assert version is not None and version.status == DatasetVersion.Status.READY and version.number == 1
    assert set(version.files) == set(DATA_FORMATS) | {"card"}
    for fmt, info in version.files.items():
        path = storage_dirs["media"] / version.file_name(fmt)
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"] and len(data) == info["bytes"], fmt
    assert not any(storage_dirs["tmp"].iterdir()), "the temporary export folder is cleaned up"

    for fmt, kind in DATA_FORMATS.items():
        loaded = _load(storage_dirs["media"] / version.file_name(fmt), kind)
        assert loaded.num_rows == version.files[fmt]["rows"] == 24, fmt
        features = loaded.features
        if fmt.startswith("trl-stepwise"):
            assert features["prompt"] == datasets.Value("string")
            assert features["completions"].feature == datasets.Value("string")
            assert features["labels"].feature == datasets.Value("bool")
            assert features["ratings"].feature.dtype in ("int8", "int64")
            assert features["split"] == datasets.Value("string")
            for row in loaded:
                assert len(row["completions"]) == len(row["labels"]) == len(row["ratings"]) > 0
                # steps after the first error are dropped: a False label can only be the last one
                assert False not in row["labels"][:-1]
        elif fmt.startswith("outcome"):
            assert features["prompt"] == datasets.Value("string")
            assert features["completion"] == datasets.Value("string")
            assert features["label"] == datasets.Value("bool")
            assert sum(loaded["label"]) == 12  # 12 reference solutions, 12 wrong-answer variants
        else:
            assert {"labeler", "question", "label", "generation"} <= set(features)
            assert loaded[0]["label"]["finish_reason"] in ("solution", "found_error")


def test_prm800k_rows_of_a_version_equal_the_genuine_input(prm800k_campaign, shared_data, storage_dirs) -> None:
    version = create_dataset_version(prm800k_campaign)
    assert version is not None
    exported = [json.loads(line) for line in (storage_dirs["media"] / version.file_name("prm800k")).open()]
    genuine = [json.loads(line) for line in (shared_data / "prm800k" / "genuine_rows.jsonl").open()]
    assert exported == genuine
    assert version.counts["rows"]["prm800k"] == 10


def test_stepwise_file_is_trl_stepwise_supervision_and_steplab_trainer_reads_it(math500_campaign, storage_dirs) -> None:
    from trl.data_utils import get_dataset_column_names, is_conversational, maybe_apply_chat_template

    from rewards.training.data import read_dataset

    version = create_dataset_version(math500_campaign)
    assert version is not None
    path = storage_dirs["media"] / version.file_name("trl-stepwise")
    loaded = _load(path, "json")
    # TRL's "stepwise supervision" type: standard (non-conversational) prompt, completions, labels
    assert {"prompt", "completions", "labels"} <= set(get_dataset_column_names(loaded))
    row = loaded[0]
    assert not is_conversational(row)
    assert maybe_apply_chat_template(row, processing_class=None)["completions"] == row["completions"]  # type: ignore[arg-type]
    rows = read_dataset(path, "prm")
    assert len(rows) == 24 and all(len(r.steps) == len(r.labels) for r in rows)
    outcome = _load(storage_dirs["media"] / version.file_name("outcome"), "json")
    assert not is_conversational(outcome[0])  # TRL's unpaired-preference type: prompt, completion, label
    assert len(read_dataset(storage_dirs["media"] / version.file_name("outcome"), "orm")) == 24


def test_split_is_by_problem_deterministic_and_seeded(math500_campaign, storage_dirs) -> None:
    first = create_dataset_version(math500_campaign, options=ExportOptions(test_fraction=0.5, seed=1))
    assert first is not None
    rows = [json.loads(line) for line in (storage_dirs["media"] / first.file_name("trl-stepwise")).open()]
    splits: dict[str, set[str]] = {}
    for row in rows:
        splits.setdefault(row["problem_id"], set()).add(row["split"])
    assert all(len(values) == 1 for values in splits.values()), "a problem is never in both splits"
    assert {s for values in splits.values() for s in values} == {"train", "test"}
    counts = first.counts["split"]
    assert counts["train"]["problems"] + counts["test"]["problems"] == 12
    again = create_dataset_version(math500_campaign, options=ExportOptions(test_fraction=0.5, seed=1))
    assert again is None, "same labels and spec: no new version"
    other_seed = create_dataset_version(math500_campaign, options=ExportOptions(test_fraction=0.5, seed=2))
    assert other_seed is not None and other_seed.number == 2
    moved = [json.loads(line) for line in (storage_dirs["media"] / other_seed.file_name("trl-stepwise")).open()]
    assert [r["split"] for r in moved] != [r["split"] for r in rows]


def test_neutral_policy_is_recorded_and_applied(math500_campaign, storage_dirs) -> None:
    version = create_dataset_version(math500_campaign, options=ExportOptions(neutral="negative"))
    assert version is not None and version.spec["neutral"] == "negative"
    rows = [json.loads(line) for line in (storage_dirs["media"] / version.file_name("trl-stepwise")).open()]
    pairs = [(rating, label) for row in rows for rating, label in zip(row["ratings"], row["labels"], strict=True)]
    assert (0, False) in pairs and (0, True) not in pairs and (1, True) in pairs


def test_a_new_labeling_makes_a_new_version_and_the_card_counts_it(math500_campaign, storage_dirs,
                                                                    make_user) -> None:
    first = create_dataset_version(math500_campaign)
    assert first is not None
    assert create_dataset_version(math500_campaign) is None
    math500_campaign.overlap = 2
    math500_campaign.save()
    second_labeler = make_user("labeler2")
    Membership.objects.create(campaign=math500_campaign, user=second_labeler, role=Role.LABELER)
    assert label_everything(math500_campaign, second_labeler) == 24
    second = create_dataset_version(math500_campaign)
    assert second is not None and second.number == 2 and second.content_sha256 != first.content_sha256
    assert second.counts["assignments"] == 48 and first.counts["assignments"] == 24
    assert second.folder != first.folder
    card = (storage_dirs["media"] / second.file_name("card")).read_text()
    assert "| labelings (assignments) | 48 |" in card
    assert second.files["prm800k"]["sha256"] in card and "Licenses" in card
    # the first version's files are untouched
    path = storage_dirs["media"] / first.file_name("prm800k")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == first.files["prm800k"]["sha256"]


def test_commands_snapshot_and_export(math500_campaign, storage_dirs, tmp_path) -> None:
    out = io.StringIO()
    call_command("snapshot_dataset", "--campaign", "lab", stdout=out)
    version = DatasetVersion.objects.get()
    assert f"id={version.pk} folder={version.folder}" in out.getvalue()
    out = io.StringIO()
    call_command("snapshot_dataset", "--campaign", "lab", stdout=out)
    assert out.getvalue().startswith("unchanged") and DatasetVersion.objects.count() == 1
    target = tmp_path / "x.parquet"
    call_command("export_dataset", "--campaign", "lab", "--format", "trl-stepwise", "--out", str(target),
                 stdout=io.StringIO())
    assert hashlib.sha256(target.read_bytes()).hexdigest() == version.files["trl-stepwise-parquet"]["sha256"]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="'nope' does not exist"):
        call_command("snapshot_dataset", "--campaign", "nope")


def test_beat_picks_campaigns_that_are_due_and_changed(math500_campaign, storage_dirs, make_user) -> None:
    from rewards.tasks import snapshot_due_datasets

    assert campaigns_due() == [math500_campaign]
    version = create_dataset_version(math500_campaign)
    assert version is not None
    assert campaigns_due() == [], "interval not elapsed"
    later = timezone.now() + timedelta(minutes=math500_campaign.export_interval_minutes + 1)
    assert campaigns_due(later) == [], "elapsed but labels unchanged"
    edited = Assignment.objects.order_by("pk").first()
    edited.finish_reason_text = "edited by an admin"
    edited.save()  # bumps updated_at, as every service write does
    assert campaigns_due(later) == [math500_campaign]
    math500_campaign.is_active = False
    math500_campaign.save()
    assert campaigns_due(later) == [] and snapshot_due_datasets.run() == []


@pytest.mark.parametrize("fixture", ["math500_campaign", "prm800k_campaign"])
def test_the_shared_database_pass_writes_what_the_separate_exports_write(fixture, request, storage_dirs,
                                                                         tmp_path: Path) -> None:
    """A version's PRM800K and stepwise files come from one pass over the database; each must equal, byte for
    byte, its format exported on its own (stepwise and conversational campaigns, give-ups included)."""
    from rewards.exports import export_campaign

    campaign = request.getfixturevalue(fixture)
    version = create_dataset_version(campaign)
    assert version is not None
    for fmt, exporter, suffix in (("prm800k", "prm800k", ".jsonl"), ("trl-stepwise", "trl-stepwise", ".jsonl"),
                                  ("trl-stepwise-parquet", "trl-stepwise", ".parquet")):
        alone = export_campaign(campaign, exporter, tmp_path / f"{fmt}{suffix}")
        assert alone.sha256 == version.files[fmt]["sha256"], fmt
        assert alone.rows == version.files[fmt]["rows"] > 0, fmt

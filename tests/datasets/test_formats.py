"""A new dataset format is one declaration: a format registered here, with its rows, Parquet schema and version
files, is exported, snapshotted into a dataset version and offered by the export command — by the exporter,
dataset versions and the command as they are, none of them edited."""
from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count

from annotate.models import Campaign, Solution
from rewards.exports import ExportOptions, export_campaign
from rewards.formats import registry
from rewards.services.datasets import create_dataset_version


def _lengths(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None
             ) -> Iterator[dict[str, Any]]:
    """One row per solution: its id and how many steps it has."""
    solutions = Solution.objects.filter(campaign=campaign).annotate(n=Count("steps")).order_by("pk")
    for solution_id, steps in solutions.values_list("pk", "n"):
        yield {"solution_id": solution_id, "steps": steps}
    if figures is not None:
        figures["lengths"] = {"seen": True}


@pytest.fixture
def lengths_format() -> Iterator[registry.Format]:
    fmt = registry.register(registry.Format(
        name="step-lengths", rows=_lengths, help="steps per solution",
        parquet_schema=lambda: pa.schema([("solution_id", pa.int64()), ("steps", pa.int64())]),
        files=(registry.VersionFile("step-lengths", "step-lengths.jsonl"),
               registry.VersionFile("step-lengths-parquet", "step-lengths.parquet"))))
    yield fmt
    registry.unregister(fmt.name)


def test_a_format_registered_here_is_exported_versioned_and_offered(lengths_format, math500_campaign, storage_dirs,
                                                                    tmp_path: Path) -> None:
    expected = {solution.pk: solution.steps.count() for solution in Solution.objects.filter(campaign=math500_campaign)}
    assert len(expected) == 24

    written = export_campaign(math500_campaign, "step-lengths", tmp_path / "lengths.parquet")
    table = pq.read_table(written.path)
    assert dict(zip(table["solution_id"].to_pylist(), table["steps"].to_pylist(), strict=True)) == expected

    version = create_dataset_version(math500_campaign)
    assert version is not None
    for key in ("step-lengths", "step-lengths-parquet"):
        stored = storage_dirs["media"] / version.file_name(key)
        assert hashlib.sha256(stored.read_bytes()).hexdigest() == version.files[key]["sha256"]
        assert version.files[key]["rows"] == 24
    assert version.counts["lengths"] == {"seen": True}
    assert "prm800k" in version.files and "trl-stepwise-parquet" in version.files

    out = tmp_path / "command.parquet"
    call_command("export_dataset", "--campaign", math500_campaign.slug, "--format", "step-lengths", "--out", str(out),
                 stdout=io.StringIO())
    assert hashlib.sha256(out.read_bytes()).hexdigest() == version.files["step-lengths-parquet"]["sha256"]
    with pytest.raises(CommandError, match="invalid choice: 'nope'"):
        call_command("export_dataset", "--campaign", math500_campaign.slug, "--format", "nope", "--out", str(out))


def test_a_format_without_parquet_says_so(math500_campaign, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="prm800k.*no Parquet form .PRM800K is nested JSON"):
        call_command("export_dataset", "--campaign", math500_campaign.slug, "--format", "prm800k",
                     "--out", str(tmp_path / "x.parquet"))
    assert not (tmp_path / "x.parquet").exists()

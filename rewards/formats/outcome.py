"""``outcome``: one row per labeled solution with a grader verdict (``rewards.exports``); what an ORM trains on."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotate.models import Campaign
from rewards.exports import ExportOptions, iter_outcome_rows, labeled_assignments

from .registry import Format, VersionFile, register


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    return iter_outcome_rows(labeled_assignments(campaign, options), options)


def schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("prompt", pa.string()), ("completion", pa.string()), ("label", pa.bool_()), ("split", pa.string()),
        ("problem_id", pa.string()), ("solution_id", pa.int64()),
    ])


register(Format(name="outcome", rows=rows, help="solution-level correctness (an ORM's data)", parquet_schema=schema,
                files=(VersionFile("outcome", "outcome.jsonl"), VersionFile("outcome-parquet", "outcome.parquet")),
                trains="orm"))

"""``trl-stepwise``: TRL's stepwise-supervision rows (``rewards.exports``: step modes, neutral policy, resolved
labels); what a PRM trains on. A step's rating becomes its label in ``rewards.formats.labels``."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotate.models import Campaign
from annotate.scales import campaign_scale
from rewards.exports import ExportOptions, iter_stepwise_rows, labeled_assignments, resolve_steps

from .registry import Format, VersionFile, register


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    return iter_stepwise_rows(labeled_assignments(campaign, options), resolve_steps(campaign, options),
                              scale=campaign_scale(campaign))


def schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("prompt", pa.string()), ("completions", pa.list_(pa.string())), ("labels", pa.list_(pa.bool_())),
        ("ratings", pa.list_(pa.int8())), ("rationales", pa.list_(pa.string())),
        ("error_categories", pa.list_(pa.string())), ("split", pa.string()),
        ("problem_id", pa.string()),
        ("solution_id", pa.int64()), ("assignment_id", pa.int64()),
    ])


register(Format(name="trl-stepwise", rows=rows, help="TRL stepwise supervision (a PRM's data)", parquet_schema=schema,
                files=(VersionFile("trl-stepwise", "trl-stepwise.jsonl"),
                       VersionFile("trl-stepwise-parquet", "trl-stepwise.parquet")), trains="prm"))

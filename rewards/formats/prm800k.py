"""``prm800k``: the lossless PRM800K JSONL (``annotate.prm800k``), one row per finished labeling, QC and
screening rows included with their flags, as the release writes them."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotate.models import Campaign
from annotate.prm800k.export import iter_prm800k_rows
from rewards.exports import ExportOptions, labeled_assignments

from .registry import Format, VersionFile, register


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    if options.labels != "raw":
        raise ValueError("prm800k is the lossless raw format: labels='resolved' applies to trl-stepwise")
    return iter_prm800k_rows(labeled_assignments(campaign, options, all_finished=True))


register(Format(name="prm800k", rows=rows, help="the lossless PRM800K JSONL",
                no_parquet="PRM800K is nested JSON: use .jsonl", files=(VersionFile("prm800k", "prm800k.jsonl"),)))

"""``consensus``: the steps on which the chosen label sources agree (``rewards.consensus``); in a dataset version
only when the campaign has machine labels beside the human ones (two sources or more)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from annotate.models import Campaign
from rewards.consensus import ConsensusCounts, campaign_sources, iter_consensus_rows
from rewards.exports import ExportOptions

from .registry import Format, VersionFile, register


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None, *,
         sources: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    counts = ConsensusCounts()
    yield from iter_consensus_rows(campaign, options, sources, counts)
    if figures is not None and counts.sources:
        figures["consensus"] = counts.as_dict()


register(Format(name="consensus", rows=rows, help="the steps the chosen label sources agree on (JSONL)",
                no_parquet="consensus rows are nested JSON (label_sources): write them to a .jsonl file",
                files=(VersionFile("consensus", "consensus.jsonl"),),
                in_version=lambda campaign: len(campaign_sources(campaign)) >= 2, options=("sources",)))

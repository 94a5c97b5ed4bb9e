"""``consensus-first-error``: the solutions whose chosen label sources all name the same first error, kept whole
up to it (Qwen2.5-Math-PRM's consensus filtering, ``rewards.consensus``); in a dataset version beside
``consensus`` (whose counts report both rules on the card)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from annotate.models import Campaign
from rewards.consensus import FIRST_ERROR, campaign_sources, iter_consensus_rows
from rewards.exports import ExportOptions

from .registry import Format, VersionFile, register


def rows(campaign: Campaign, options: ExportOptions, figures: dict[str, Any] | None = None, *,
         sources: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    yield from iter_consensus_rows(campaign, options, sources, rule=FIRST_ERROR)


register(Format(name="consensus-first-error", rows=rows,
                help="whole solutions whose chosen label sources agree on the first error (JSONL)",
                no_parquet="consensus rows are nested JSON (label_sources): write them to a .jsonl file",
                files=(VersionFile("consensus_first_error", "consensus_first_error.jsonl"),),
                in_version=lambda campaign: len(campaign_sources(campaign)) >= 2, options=("sources",)))

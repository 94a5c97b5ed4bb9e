"""Reads of the dataset pages (versions with their counts and what changed), kept apart from the services' writes."""
from __future__ import annotations

from typing import Any

from annotate.permissions import research_campaigns
from rewards.models import DatasetVersion


def ready_versions(user: Any) -> list[DatasetVersion]:
    """The ready dataset versions of the campaigns ``user`` researches, newest first within each campaign."""
    return list(DatasetVersion.objects.filter(campaign__in=research_campaigns(user),
                                              status=DatasetVersion.Status.READY)
                .select_related("campaign").order_by("campaign__slug", "-number"))


COUNTED = (("problems", "problems"), ("solutions", "solutions"), ("assignments", "labelings"), ("steps", "steps"))
RATINGS = (("negative", "−1"), ("neutral", "0"), ("positive", "+1"))


def version_rows(versions: list[DatasetVersion]) -> list[dict[str, Any]]:
    """Each version with its counts, its label distribution (shares of −1 / 0 / +1) and what changed since the
    campaign's previous ready version (``versions`` come newest first within each campaign)."""
    rows = []
    for position, version in enumerate(versions):
        following = versions[position + 1] if position + 1 < len(versions) else None
        previous = following if following is not None and following.campaign_id == version.campaign_id else None
        counts, before = version.counts or {}, (previous.counts or {}) if previous else None
        ratings = counts.get("ratings") or {}
        rated = sum(int(ratings.get(key) or 0) for key, _ in RATINGS)
        changes = []
        if before is not None:
            for key, label in COUNTED:
                delta = int(counts.get(key) or 0) - int(before.get(key) or 0)
                if delta:
                    changes.append({"label": label, "delta": delta})
            for key, label in RATINGS:
                delta = int(ratings.get(key) or 0) - int((before.get("ratings") or {}).get(key) or 0)
                if delta:
                    changes.append({"label": f"{label} ratings", "delta": delta})
        rows.append({
            "version": version, "previous": previous, "changes": changes,
            "distribution": [{"key": key, "label": label, "count": int(ratings.get(key) or 0),
                              "percent": round(100 * int(ratings.get(key) or 0) / rated, 1) if rated else 0.0}
                             for key, label in RATINGS],
        })
    return rows

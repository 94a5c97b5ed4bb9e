"""Researcher-facing records: immutable dataset versions of a campaign's labels."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Campaign


class DatasetVersion(models.Model):
    """An immutable snapshot of a campaign's labels, written once in every format.

    ``files`` maps a format key (``prm800k``, ``trl-stepwise``, ``trl-stepwise-parquet``, ``outcome``,
    ``card``…) to ``{"name": <storage name>, "sha256": …, "bytes": …, "rows": …}``; names are relative to
    Django's default storage. ``content_sha256`` identifies the labels themselves, so an unchanged
    campaign produces no new version.
    """

    class Status(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="dataset_versions")
    number = models.PositiveIntegerField(help_text="1, 2, … per campaign.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.BUILDING)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    spec = models.JSONField(default=dict, help_text="Filter spec: generations, raw/adjudicated, QC, reasons, split.")
    counts = models.JSONField(default=dict)
    content_sha256 = models.CharField(max_length=64, db_index=True)
    code_version = models.CharField(max_length=64, blank=True)
    folder = models.CharField(max_length=300, help_text="Storage prefix holding this version's files.")
    files = models.JSONField(default=dict)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["campaign", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "number"], name="datasetversion_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign.slug} v{self.number}"

    def file_name(self, fmt: str) -> str:
        """Storage name of one format's file; KeyError names the formats this version has."""
        try:
            return str(self.files[fmt]["name"])
        except KeyError:
            raise KeyError(f"dataset version {self} has no {fmt!r} file (has: {', '.join(sorted(self.files))})") from None

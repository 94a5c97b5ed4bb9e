"""Researcher-facing records: immutable dataset versions of a campaign's labels (API tokens: ``api.models``)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models import Campaign


class NumberedPerCampaign(models.Model):
    """A row numbered 1, 2, … within its campaign (the model's ``campaign`` and ``number``), the latest first."""

    class Meta:
        abstract = True
        ordering = ["campaign", "-number"]
        constraints = [models.UniqueConstraint(fields=["campaign", "number"], name="%(class)s_unique_number")]


class DatasetVersion(NumberedPerCampaign):
    """An immutable snapshot of a campaign's labels, written once in every format.

    ``files`` maps a format key (``prm800k``, ``trl-stepwise``, ``trl-stepwise-parquet``, ``outcome``,
    ``outcome-parquet``, ``card``) to ``{"name": <storage name>, "sha256": …, "bytes": …, "rows": …}``;
    names are relative to Django's default storage. ``content_sha256`` identifies the labels themselves
    (the spec plus every data file's hash), so an unchanged campaign produces no new version.

    A row is only ever created once every file is in storage (``rewards.services.datasets``), so a
    version that exists is complete: ready is its only status (kept as a field: the API and the queries name it).
    """

    class Status(models.TextChoices):
        READY = "ready"

    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="dataset_versions")
    number = models.PositiveIntegerField(help_text="1, 2, … per campaign.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    spec = models.JSONField(default=dict, help_text="Filter spec: generations, raw/adjudicated, QC, reasons, split.")
    counts = models.JSONField(default=dict)
    content_sha256 = models.CharField(max_length=64, db_index=True)
    code_version = models.CharField(max_length=64, blank=True)
    folder = models.CharField(max_length=300, help_text="Storage prefix holding this version's files.")
    files = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    # The campaign's label watermark when this version was cut: lets the beat skip unchanged campaigns
    # without exporting them (see ``rewards.services.datasets.label_watermark``).
    watermark = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.campaign.slug} v{self.number}"

    def file_name(self, fmt: str) -> str:
        """Storage name of one format's file; KeyError names the formats this version has."""
        try:
            return str(self.files[fmt]["name"])
        except KeyError:
            known = ", ".join(sorted(self.files))
            raise KeyError(f"dataset version {self} has no {fmt!r} file (has: {known})") from None


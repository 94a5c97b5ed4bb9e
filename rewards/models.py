"""Researcher-facing records: immutable dataset versions of a campaign's labels, and API tokens."""
from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

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


TOKEN_PREFIX = "stp_"


def hash_token(raw: str) -> str:
    """Tokens carry 256 random bits, so a plain SHA-256 is as safe as a slow hash and lets us index it."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class ApiToken(models.Model):
    """A personal API token: only its hash is stored; ``prefix`` (``stp_`` + 8 chars) is what users see."""

    class Scope(models.TextChoices):
        READ = "read", "Read and download"
        WRITE = "write", "Read and write (import, label)"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["key_hash"], condition=Q(revoked_at__isnull=True), name="apitoken_live_idx")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def generate() -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)

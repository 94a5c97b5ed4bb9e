"""Personal API tokens: what every endpoint under /api/ (labeling, datasets, jobs, webhooks) authenticates with."""
from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

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

"""Served-model endpoints: where an OpenAI-compatible server is, which model it serves, its key (encrypted at
rest) and what one job may spend on it; and the database's concurrency slots used when there is no Redis."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Endpoint(models.Model):
    """One served model. ``campaign`` null: registered by staff for every campaign. The key is stored only as
    ``api_key_encrypted`` (``endpoints.crypto``); pages, the API and exports say only whether there is one."""

    campaign = models.ForeignKey("annotate.Campaign", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="endpoints")
    name = models.CharField(max_length=100)
    base_url = models.CharField(max_length=2000, help_text='the OpenAI-compatible root, e.g. "http://gpu:8000/v1"')
    model = models.CharField(max_length=200, help_text="the model name the server serves")
    api_key_encrypted = models.TextField(blank=True, editable=False)
    max_concurrency = models.PositiveSmallIntegerField(default=4, help_text="requests in flight across workers")
    timeout_s = models.FloatField(default=60.0, help_text="one request, connect to last byte")
    token_budget = models.PositiveIntegerField(default=200_000, help_text="prompt + completion tokens per job")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    # Only a staff-registered endpoint may reach the private addresses STEPLAB_ENDPOINT_ALLOW admits.
    registered_by_staff = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign_id", "name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "name"], name="endpoint_name_per_campaign"),
            models.UniqueConstraint(fields=["name"], condition=Q(campaign__isnull=True),
                                    name="endpoint_name_staff_wide"),
            models.CheckConstraint(condition=Q(max_concurrency__gte=1), name="endpoint_concurrency_positive"),
            models.CheckConstraint(condition=Q(timeout_s__gt=0), name="endpoint_timeout_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class EndpointSlot(models.Model):
    """One of an endpoint's ``max_concurrency`` slots, for the database's lock (no Redis): held while
    ``holder`` is set; a claim older than its lease is taken back (its worker died)."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="slots")
    number = models.PositiveSmallIntegerField()
    holder = models.CharField(max_length=64, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "number"], name="endpoint_slot_once")]

    def __str__(self) -> str:
        return f"slot {self.number} of endpoint {self.endpoint_id}"

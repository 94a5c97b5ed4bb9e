"""A campaign's webhooks, their deliveries (the log), and the progress milestones already announced."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from steplab.events import Name


class Event(models.TextChoices):
    """What a receiver can subscribe to; the value is the ``X-Steplab-Event`` header and the payload's ``event``.
    All but the progress milestones are domain events (``steplab.events``) passed on as they are."""

    DATASET_VERSION_READY = Name.DATASET_VERSION_READY.value, "Dataset version ready"
    JOB_FINISHED = Name.JOB_FINISHED.value, "Job finished"
    JOB_FAILED = Name.JOB_FAILED.value, "Job failed"
    LABELING_ROUND_COMPLETED = Name.LABELING_ROUND_COMPLETED.value, "Labeling round completed"
    CAMPAIGN_PROGRESS = "campaign.progress", "Campaign progress milestone (25/50/75/100 % labeled)"


class Webhook(models.Model):
    """A receiver URL of one campaign for some events. The secret signs every delivery; it is shown once, when
    the hook is registered (``webhooks.services.register_webhook``)."""

    campaign = models.ForeignKey("annotate.Campaign", on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list, help_text="event names; see webhooks.models.Event")
    secret = models.CharField(max_length=100, editable=False)
    is_active = models.BooleanField(default=True)
    # Why Steplab turned the hook off (its URL refused by the outbound rules); empty when active or off by hand.
    disabled_reason = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "pk"]

    def __str__(self) -> str:
        return f"{self.url} ({', '.join(self.events)})"


class Delivery(models.Model):
    """One event sent to one webhook: pending until the receiver answers 2xx (delivered) or the attempts run out
    (failed). ``attempts_log`` keeps every try: when, the status code or the error, how long it took.

    An attempt claims the row (``claimed_at``) with one conditional UPDATE and holds no transaction while it
    waits on the receiver; ``next_attempt_at`` is when the next try is due. A row claimed long ago (its worker
    died) or overdue is sent again by ``webhooks.services.sweep_deliveries``: delivery is at least once."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40, choices=Event.choices)
    payload = models.JSONField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    attempts_log = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["next_attempt_at"], condition=Q(status="pending"),
                                name="delivery_pending_due")]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook.url}: {self.status}"


class ProgressMilestone(models.Model):
    """A share of a campaign's solutions labeled that was announced once (the unique pair keeps it once)."""

    campaign = models.ForeignKey("annotate.Campaign", on_delete=models.CASCADE, related_name="+")
    percent = models.PositiveSmallIntegerField()
    reached_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "percent"], name="milestone_once_per_campaign"),
            models.CheckConstraint(condition=Q(percent__gte=0) & Q(percent__lte=100), name="milestone_percent"),
        ]

    def __str__(self) -> str:
        return f"{self.percent} % of campaign {self.campaign_id}"

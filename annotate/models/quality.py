"""Quality: reviewers' adjudicated step labels and the campaign's precomputed quality metrics."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..scales import RATING_MAX, RATING_MIN
from .campaigns import Campaign
from .solutions import Solution, Step


class ResolvedLabel(models.Model):
    """A reviewer's adjudicated rating of one step, kept beside the labelers' raw ratings (never replacing them)."""

    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="resolved_label")
    solution = models.ForeignKey(Solution, on_delete=models.CASCADE, related_name="resolved_labels")
    rating = models.SmallIntegerField()
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(rating__gte=RATING_MIN, rating__lte=RATING_MAX),
                                   name="resolved_rating_range"),
        ]

    def __str__(self) -> str:
        return f"resolved {self.rating} on step {self.step_id}"


class CampaignMetrics(models.Model):
    """Quality metrics too slow for a page view, precomputed by a Celery task (latest row per campaign)."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="metrics")
    data = models.JSONField(default=dict)
    computed_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"metrics of {self.campaign_id} at {self.computed_at:%Y-%m-%d %H:%M}"

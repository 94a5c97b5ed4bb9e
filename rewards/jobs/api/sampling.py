"""Sampling jobs: a campaign's, start one."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotate.models import Campaign
from annotate.permissions import can_start_sampling

from .. import models
from ..services.sampling import USER_KEYS as SAMPLING_KEYS
from ..services.sampling import start_sampling_job
from .base import (
    CampaignJobsView,
    CampaignRowOut,
    settings_field,
)


class StartSamplingInput(serializers.Serializer):
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    config = settings_field("Sampler settings", SAMPLING_KEYS)


class SamplingJobOut(CampaignRowOut):
    class Meta:
        model = models.SamplingJob
        fields = ("id", "campaign", "backend", "status", "progress", "config", "problem_count", "summary", "pool",
                  "error", "created_at", "started_at", "finished_at")


class SamplingJobsView(CampaignJobsView):
    job_output = SamplingJobOut
    start_input = StartSamplingInput
    about = "The campaign's sampling jobs, newest first."
    about_start = "Sample N solutions per campaign problem with a local LM; they become the campaign's candidate pool."

    def may_start(self, user: Any, campaign: Campaign) -> bool:
        return can_start_sampling(user, campaign)

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        return start_sampling_job(campaign, config=values["config"], backend=values["backend"], user=self.request.user)

"""Sampling jobs: a campaign's, start one (on a served endpoint too), resume one that stopped."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotate.models import Campaign
from annotate.permissions import can_start_sampling
from steplab.jsonlimits import MAX_ID

from .. import models
from ..services.sampling import USER_KEYS as SAMPLING_KEYS
from ..services.sampling import resume_sampling_job, start_sampling_job
from .base import (
    CampaignJobsView,
    CampaignRowOut,
    settings_field,
)
from .sampling_resume import resume_view, usable_endpoint


class StartSamplingInput(serializers.Serializer):
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    config = settings_field("Sampler settings", SAMPLING_KEYS)
    endpoint = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=MAX_ID,
                                       help_text="Sample from this served endpoint's model (its id).")


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
        return start_sampling_job(campaign, config=values["config"], backend=values["backend"],
                                  endpoint=usable_endpoint(self.request.user, campaign, values["endpoint"]),
                                  user=self.request.user)


SamplingResumeView = resume_view(
    rows=models.SamplingJob.objects.select_related("campaign"), output=SamplingJobOut, missing="no such sampling job",
    may=can_start_sampling, resume=resume_sampling_job,
    about="Resume a sampling job that stopped (failed or cancelled): a new job keeps its finished samples and "
          "samples the rest; 409 naming the reason when it cannot be resumed.")

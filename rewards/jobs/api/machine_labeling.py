"""Machine labeling jobs (Monte-Carlo rollouts, PRM step scores): a campaign's, start one (Monte-Carlo on a served
endpoint too), resume a Monte-Carlo one that stopped."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotate.models import Campaign
from annotate.permissions import can_start_machine_labeling
from steplab.jsonlimits import MAX_ID

from .. import models
from ..services.machine_labeling import (
    DEFAULT_SOLUTIONS,
    MAX_SOLUTIONS,
    MC_KEYS,
    missing_reward_model,
    resume_machine_labeling_job,
    start_machine_labeling_job,
)
from ..services.training import JobInputError
from .base import (
    CampaignJobsView,
    CampaignRowOut,
    settings_field,
)
from .sampling_resume import resume_view, usable_endpoint


class StartMachineLabelingInput(serializers.Serializer):
    method = serializers.ChoiceField(choices=models.LabelingMethod.choices)
    solutions = serializers.IntegerField(min_value=1, max_value=MAX_SOLUTIONS, default=DEFAULT_SOLUTIONS,
                                         help_text="How many regular solutions to label (unlabeled ones first).")
    solution_ids = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
                                         max_length=MAX_SOLUTIONS, required=False, allow_null=True,
                                         default=None, help_text="Label these solutions instead.")
    reward_model = serializers.IntegerField(required=False, allow_null=True, default=None, max_value=MAX_ID,
                                            help_text="method prm: the registered PRM's id.")
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    config = settings_field("method mc: rollout settings", MC_KEYS)
    endpoint = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=MAX_ID,
                                       help_text="method mc: roll out on this served endpoint's model (its id).")


class MachineLabelingJobOut(CampaignRowOut):
    class Meta:
        model = models.MachineLabelingJob
        fields = ("id", "campaign", "method", "reward_model", "backend", "status", "progress", "config",
                  "solution_count", "summary", "labels_recorded", "error", "created_at", "started_at", "finished_at")


class MachineLabelingJobsView(CampaignJobsView):
    job_output = MachineLabelingJobOut
    start_input = StartMachineLabelingInput
    about = "The campaign's machine labeling jobs (Monte-Carlo rollouts, PRM step scores), newest first."
    about_start = ("Label steps of chosen solutions by machine: recorded as the source ``mc:<model>`` or "
                   "``prm:<name>``.")

    def may_start(self, user: Any, campaign: Campaign) -> bool:
        return can_start_machine_labeling(user, campaign)

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        reward_model = None
        if values["reward_model"] is not None:
            reward_model = models.RewardModel.objects.filter(pk=values["reward_model"]).first()
            if reward_model is None:
                raise JobInputError("reward_model", missing_reward_model(values["reward_model"], campaign))
        return start_machine_labeling_job(
            campaign=campaign, method=values["method"], limit=values["solutions"],
            solution_ids=values["solution_ids"], reward_model=reward_model, config=values["config"],
            backend=values["backend"], endpoint=usable_endpoint(self.request.user, campaign, values["endpoint"]),
            user=self.request.user)


MachineLabelingResumeView = resume_view(
    rows=models.MachineLabelingJob.objects.select_related("campaign"), output=MachineLabelingJobOut,
    missing="no such machine labeling job", may=can_start_machine_labeling, resume=resume_machine_labeling_job,
    about="Resume a Monte-Carlo job that stopped (failed or cancelled): a new job keeps its labeled solutions and "
          "labels the rest; 409 naming the reason when it cannot be resumed.")

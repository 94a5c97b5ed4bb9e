"""Training jobs: list, start, one job, cancel."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.permissions import can_research, is_staff, research_campaigns
from rewards.models import DatasetVersion

from .. import models
from ..services.training import USER_KEYS, JobInputError, TrainingRequest, backbones, request_cancel, start_training_job
from .base import (
    MAX_ID,
    CampaignRef,
    JobsApiView,
    input_error,
    one_job_views,
    require_area,
    settings_field,
)


class StartTrainingInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=models.Kind.choices)
    dataset_version = serializers.IntegerField(max_value=MAX_ID,
                                               help_text="A ready dataset version of a campaign you work on.")
    base_model = serializers.CharField(default="default", help_text="'default' (CPU MiniLM) or a configured backbone.")
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    hyper = settings_field("Trainer settings", USER_KEYS)


class TrainingJobOut(serializers.ModelSerializer):
    campaign = CampaignRef(allow_null=True)
    reward_model = serializers.SerializerMethodField()

    class Meta:
        model = models.TrainingJob
        fields = ("id", "kind", "campaign", "dataset_version", "backend", "status", "progress", "step", "total_steps",
                  "config", "metrics", "curve", "error", "log_tail", "external_id", "attempts", "auto_started",
                  "reward_model", "created_at", "started_at", "finished_at", "heartbeat_at")

    def get_reward_model(self, job: models.TrainingJob) -> int | None:
        model = getattr(job, "reward_model", None)
        return model.pk if model is not None else None


class ListJobsInput(serializers.Serializer):
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="campaign id")
    status = serializers.ChoiceField(choices=models.JobStatus.choices, required=False)


class LegacyListJobsInput(serializers.Serializer):
    campaign = serializers.SlugField(required=False, help_text="campaign slug")
    status = serializers.ChoiceField(choices=models.JobStatus.choices, required=False)



def _visible_jobs(request: Request) -> Any:
    require_area(request)
    jobs = models.TrainingJob.objects.select_related("campaign", "reward_model")
    return jobs if is_staff(request.user) else jobs.filter(campaign__in=research_campaigns(request.user))


class TrainingJobsView(JobsApiView):
    @extend_schema(parameters=[ListJobsInput], responses={200: TrainingJobOut(many=True)})
    def get(self, request: Request) -> Response:
        """Training jobs of the campaigns you work on, newest first."""
        query = (LegacyListJobsInput if self.legacy else ListJobsInput)(data=request.query_params)
        query.is_valid(raise_exception=True)
        jobs = _visible_jobs(request)
        if "campaign" in query.validated_data:
            campaign = query.validated_data["campaign"]
            jobs = jobs.filter(**{"campaign__slug" if self.legacy else "campaign_id": campaign})
        if "status" in query.validated_data:
            jobs = jobs.filter(status=query.validated_data["status"])
        return self.listing(jobs.order_by("-created_at", "-id"), TrainingJobOut, cut=200)

    @extend_schema(request=StartTrainingInput, responses={201: TrainingJobOut})
    def post(self, request: Request) -> Response:
        """Start a PRM or ORM job on a dataset version (queued; a worker runs it on the chosen backend)."""
        require_area(request)
        values = self.valid(StartTrainingInput)
        version = DatasetVersion.objects.select_related("campaign").filter(pk=values["dataset_version"]).first()
        if version is None or not can_research(request.user, version.campaign):
            raise ValidationError({"dataset_version": [f"no dataset version {values['dataset_version']} of a "
                                                       "campaign you work on"]})
        if values["base_model"] not in backbones():
            raise ValidationError({"base_model": [f"must be one of {', '.join(backbones())}"]})
        try:
            job = start_training_job(TrainingRequest(kind=values["kind"], dataset_version=version,
                                                     base_model=values["base_model"], backend=values["backend"],
                                                     hyper=values["hyper"]), user=request.user)
        except JobInputError as exc:
            return input_error(exc)
        return Response(self.out(TrainingJobOut, job), status=status.HTTP_201_CREATED)


TrainingJobView, TrainingJobCancelView = one_job_views(
    rows=models.TrainingJob.objects.select_related("campaign", "reward_model"),
    campaign_of=lambda job: job.campaign, missing="no such job", output=TrainingJobOut, cancel=request_cancel,
    about="One job: status, progress, loss curve, final metrics, error and log tail, the registered model.",
    about_cancel="Cancel: a queued job at once, a running one when its watcher next polls (it stops the process).")

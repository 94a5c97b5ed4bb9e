"""REST endpoints of reward-model work, the same services as the pages.

* ``GET/POST /models/api/jobs/`` — training jobs: list (``?campaign=SLUG&status=``), start one;
  ``GET /models/api/jobs/<id>/`` (progress, loss curve, metrics, error, the registered model);
  ``POST /models/api/jobs/<id>/cancel/``. Reading and starting: staff and the campaign's admins/researchers.
* ``GET/POST /models/api/campaigns/<slug>/generations/`` — list a campaign's generations, start the next one;
  ``GET/POST /models/api/campaigns/<slug>/sampling/`` — sampling jobs. Starting: staff and its admins.

Session or personal API token (a write-scoped token to POST). Everyone else gets 404 for the campaign or
job (its existence is not revealed) or 403 when they may read but not start.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.models import Campaign
from rewards.active import STRATEGIES
from rewards.api.auth import ApiTokenAuthentication, TokenScope

from . import selectors
from rewards.models import DatasetVersion

from .models import Backend, CandidatePool, Generation, JobStatus, Kind, PoolPurpose, RewardModel, SamplingJob, TrainingJob
from .services.access import accessible_campaigns, can_access, has_any_access
from .services.generations import MAX_BATCH_SIZE, GenerationNotAllowed, can_start_generation, start_generation
from .services.sampling import USER_KEYS as SAMPLING_KEYS
from .services.sampling import start_sampling_job
from .services.training import USER_KEYS, JobInputError, TrainingRequest, backbones, request_cancel, start_training_job

AUTHENTICATION = [ApiTokenAuthentication, SessionAuthentication]
PERMISSIONS = [IsAuthenticated, TokenScope]
MAX_ID = 2**63 - 1  # primary keys are bigints: a larger id is a 400 naming the field, not a database error


class StartGenerationInput(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES))
    batch_size = serializers.IntegerField(min_value=1, max_value=MAX_BATCH_SIZE)
    config = serializers.DictField(required=False, default=dict, help_text="Strategy options, e.g. max_per_problem.")
    pool = serializers.IntegerField(required=False, max_value=MAX_ID,
                                    help_text="Candidate pool id (default: the campaign's newest labeling pool).")
    reward_model = serializers.IntegerField(required=False, max_value=MAX_ID,
                                            help_text="PRM id (default: the campaign's best PRM).")


class GenerationOut(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Generation
        fields = ("id", "campaign", "number", "status", "strategy", "strategy_config", "batch_size", "selected_count",
                  "pool", "reward_model", "dataset_version", "scoring_job", "auto_started", "error", "created_at",
                  "finished_at")


def _campaign(request: Request, slug: str) -> Campaign:
    campaign = Campaign.objects.filter(slug=slug).first()
    if campaign is None or not can_access(request.user, campaign):
        raise NotFound("no such campaign")
    return campaign


class GenerationsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: GenerationOut(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        """The campaign's generations with their figures (selected, labeled, found-error share, retrained PRM)."""
        campaign = _campaign(request, slug)
        rows = {row["id"]: row for row in selectors.generation_rows(campaign)}
        out = []
        for generation in Generation.objects.filter(campaign=campaign).select_related("campaign").order_by("number"):
            out.append({**GenerationOut(generation).data, "figures": rows.get(generation.pk)})
        return Response(out)

    @extend_schema(request=StartGenerationInput, responses={201: GenerationOut})
    def post(self, request: Request, slug: str) -> Response:
        """Start the next generation (admins and staff): score the pool with the PRM, then select a batch."""
        campaign = _campaign(request, slug)
        if not can_start_generation(request.user, campaign):
            raise PermissionDenied("only staff and the campaign's admins start generations")
        data = StartGenerationInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        pool = model = None
        if "pool" in values:
            pool = CandidatePool.objects.filter(pk=values["pool"], campaign=campaign,
                                                purpose=PoolPurpose.LABELING).first()
            if pool is None:
                raise ValidationError({"pool": [f"no labeling pool {values['pool']} in campaign {slug}"]})
        if "reward_model" in values:
            model = RewardModel.objects.filter(pk=values["reward_model"], campaign=campaign).first()
            if model is None:
                raise ValidationError({"reward_model": [f"no reward model {values['reward_model']} in campaign {slug}"]})
        try:
            generation = start_generation(campaign, strategy=values["strategy"], batch_size=values["batch_size"],
                                          config=values["config"], user=request.user, pool=pool, reward_model=model)
        except GenerationNotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except JobInputError as exc:
            code = status.HTTP_409_CONFLICT if exc.field == "campaign" else status.HTTP_400_BAD_REQUEST
            return Response({exc.field: [str(exc)]}, status=code)
        return Response(GenerationOut(generation).data, status=status.HTTP_201_CREATED)


# --- training jobs ------------------------------------------------------------------------------------

class StartTrainingInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Kind.choices)
    dataset_version = serializers.IntegerField(max_value=MAX_ID,
                                               help_text="A ready dataset version of a campaign you work on.")
    base_model = serializers.CharField(default="default", help_text="'default' (CPU MiniLM) or a configured backbone.")
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.LOCAL)
    hyper = serializers.DictField(required=False, default=dict,
                                  help_text=f"Trainer settings: {', '.join(USER_KEYS)}.")


class TrainingJobOut(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    reward_model = serializers.SerializerMethodField()

    class Meta:
        model = TrainingJob
        fields = ("id", "kind", "campaign", "dataset_version", "backend", "status", "progress", "step", "total_steps",
                  "config", "metrics", "curve", "error", "log_tail", "external_id", "attempts", "auto_started",
                  "reward_model", "created_at", "started_at", "finished_at", "heartbeat_at")

    def get_reward_model(self, job: TrainingJob) -> int | None:
        model = getattr(job, "reward_model", None)
        return model.pk if model is not None else None


class ListJobsInput(serializers.Serializer):
    campaign = serializers.SlugField(required=False)
    status = serializers.ChoiceField(choices=JobStatus.choices, required=False)


def _require_area(request: Request) -> None:
    if not has_any_access(request.user):
        raise PermissionDenied("reward models are for campaign admins, researchers and staff")


def _visible_jobs(request: Request) -> Any:
    _require_area(request)
    jobs = TrainingJob.objects.select_related("campaign", "reward_model")
    return jobs if request.user.is_staff else jobs.filter(campaign__in=accessible_campaigns(request.user))


class TrainingJobsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(parameters=[ListJobsInput], responses={200: TrainingJobOut(many=True)})
    def get(self, request: Request) -> Response:
        """Training jobs of the campaigns you work on, newest first (at most 200)."""
        query = ListJobsInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        jobs = _visible_jobs(request)
        if "campaign" in query.validated_data:
            jobs = jobs.filter(campaign__slug=query.validated_data["campaign"])
        if "status" in query.validated_data:
            jobs = jobs.filter(status=query.validated_data["status"])
        return Response(TrainingJobOut(jobs.order_by("-created_at", "-id")[:200], many=True).data)

    @extend_schema(request=StartTrainingInput, responses={201: TrainingJobOut})
    def post(self, request: Request) -> Response:
        """Start a PRM or ORM job on a dataset version (queued; a worker runs it on the chosen backend)."""
        _require_area(request)
        data = StartTrainingInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        version = DatasetVersion.objects.select_related("campaign").filter(pk=values["dataset_version"]).first()
        if version is None or not can_access(request.user, version.campaign):
            raise ValidationError({"dataset_version": [f"no dataset version {values['dataset_version']} of a "
                                                       "campaign you work on"]})
        if values["base_model"] not in backbones():
            raise ValidationError({"base_model": [f"must be one of {', '.join(backbones())}"]})
        try:
            job = start_training_job(TrainingRequest(kind=values["kind"], dataset_version=version,
                                                     base_model=values["base_model"], backend=values["backend"],
                                                     hyper=values["hyper"]), user=request.user)
        except JobInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(TrainingJobOut(job).data, status=status.HTTP_201_CREATED)


def _training_job(request: Request, pk: int) -> TrainingJob:
    job = _visible_jobs(request).filter(pk=pk).first()
    if job is None:
        raise NotFound("no such job")
    return job


class TrainingJobView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: TrainingJobOut})
    def get(self, request: Request, pk: int) -> Response:
        """One job: status, progress, loss curve, final metrics, error and log tail, the registered model."""
        return Response(TrainingJobOut(_training_job(request, pk)).data)


class TrainingJobCancelView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(request=None, responses={200: TrainingJobOut})
    def post(self, request: Request, pk: int) -> Response:
        """Cancel: a queued job at once, a running one when its watcher next polls (it stops the process)."""
        job = _training_job(request, pk)
        request_cancel(job)
        return Response(TrainingJobOut(_training_job(request, pk)).data)


# --- sampling jobs ------------------------------------------------------------------------------------

class StartSamplingInput(serializers.Serializer):
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.LOCAL)
    config = serializers.DictField(required=False, default=dict,
                                   help_text=f"Sampler settings: {', '.join(SAMPLING_KEYS)}.")


class SamplingJobOut(serializers.ModelSerializer):
    campaign = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = SamplingJob
        fields = ("id", "campaign", "backend", "status", "progress", "config", "problem_count", "summary", "pool",
                  "error", "created_at", "started_at", "finished_at")


class SamplingJobsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: SamplingJobOut(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        """The campaign's sampling jobs, newest first (at most 100)."""
        campaign = _campaign(request, slug)
        return Response(SamplingJobOut(SamplingJob.objects.filter(campaign=campaign).select_related("campaign")[:100],
                                       many=True).data)

    @extend_schema(request=StartSamplingInput, responses={201: SamplingJobOut})
    def post(self, request: Request, slug: str) -> Response:
        """Sample N solutions per campaign problem with a local LM; they become the campaign's candidate pool."""
        campaign = _campaign(request, slug)
        if not can_start_generation(request.user, campaign):
            raise PermissionDenied("only staff and the campaign's admins start sampling jobs")
        data = StartSamplingInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            job = start_sampling_job(campaign, data.validated_data["config"], backend=data.validated_data["backend"],
                                     user=request.user)
        except JobInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(SamplingJobOut(job).data, status=status.HTTP_201_CREATED)

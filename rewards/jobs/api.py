"""REST endpoints of reward-model work, the same services as the pages.

* ``GET/POST /models/api/jobs/`` — training jobs: list (``?campaign=SLUG&status=``), start one;
  ``GET /models/api/jobs/<id>/`` (progress, loss curve, metrics, error, the registered model);
  ``POST /models/api/jobs/<id>/cancel/``. Reading and starting: staff and the campaign's admins/researchers.
* The loop (staff and the campaign's admins/researchers): ``POST …/campaigns/<slug>/snapshot/`` (a dataset
  version), ``GET/POST …/campaigns/<slug>/pools/`` (upload, multipart), ``GET/POST …/campaigns/<slug>/scoring/``,
  ``GET …/scoring/<id>/`` and ``POST …/scoring/<id>/cancel/``, ``POST …/campaigns/<slug>/evaluations/``,
  ``GET/POST …/campaigns/<slug>/comparisons/`` (one-click PRM vs ORM), ``GET …/comparisons/<id>/``,
  ``POST …/comparisons/<id>/cancel/``.
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
from annotate.services.importing import ImportFailed
from rewards.active import STRATEGIES
from rewards.api.auth import ApiTokenAuthentication, TokenScope
from rewards.models import DatasetVersion

from . import selectors
from .models import (
    Backend,
    CandidatePool,
    ComparisonRun,
    Generation,
    JobStatus,
    Kind,
    PoolPurpose,
    RewardModel,
    SamplingJob,
    ScoringJob,
    TrainingJob,
)
from .services.access import accessible_campaigns, can_access, has_any_access
from .services.comparisons import (
    DEFAULT_MAX_STEPS,
    DEFAULT_PER_PROBLEM,
    MAX_MAX_STEPS,
    request_cancel_comparison,
    snapshot_labels,
    start_comparison,
)
from .services.evaluation import evaluate_scorings
from .services.generations import MAX_BATCH_SIZE, GenerationNotAllowed, can_start_generation, start_generation
from .services.pools import import_uploaded_pool
from .services.sampling import USER_KEYS as SAMPLING_KEYS
from .services.sampling import start_sampling_job
from .services.scoring import start_scoring_job
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
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

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
                message = f"no reward model {values['reward_model']} in campaign {slug}"
                raise ValidationError({"reward_model": [message]})
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
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
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
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

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


# --- the loop: dataset versions, pools, scoring, evaluation, one-click comparison ---------------------

class DatasetVersionOut(serializers.ModelSerializer):
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = DatasetVersion
        fields = ("id", "campaign", "number", "status", "content_sha256", "counts", "files", "created_at")


class SnapshotView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(request=None, responses={201: DatasetVersionOut, 200: DatasetVersionOut})
    def post(self, request: Request, slug: str) -> Response:
        """Snapshot the campaign's labels: 201 with the new version, or 200 with the latest one when the labels
        have not changed since (``new`` says which)."""
        version, new = snapshot_labels(_campaign(request, slug), user=request.user)
        return Response({**DatasetVersionOut(version).data, "new": new},
                        status=status.HTTP_201_CREATED if new else status.HTTP_200_OK)


class PoolOut(serializers.ModelSerializer):
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = CandidatePool
        fields = ("id", "name", "campaign", "purpose", "source", "split_rule", "problem_count", "candidate_count",
                  "pool_size", "created_at")


class UploadPoolInput(serializers.Serializer):
    file = serializers.FileField(help_text="JSONL pool file (see the pool upload page for the two layouts).")
    name = serializers.CharField(required=False, default="", allow_blank=True)
    purpose = serializers.ChoiceField(choices=PoolPurpose.choices, default=PoolPurpose.EVALUATION)
    split_rule = serializers.ChoiceField(choices=["auto", "lines", "paragraphs"], default="auto")


class PoolsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: PoolOut(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        """The campaign's candidate pools, newest first."""
        campaign = _campaign(request, slug)
        return Response(PoolOut(CandidatePool.objects.filter(campaign=campaign).select_related("campaign")
                                .order_by("-created_at", "-id")[:100], many=True).data)

    @extend_schema(request={"multipart/form-data": UploadPoolInput}, responses={201: PoolOut})
    def post(self, request: Request, slug: str) -> Response:
        """Upload a pool file (multipart): imported and graded (201 with the counts), or 400 listing every bad
        line (file, line, field) with nothing saved."""
        campaign = _campaign(request, slug)
        data = UploadPoolInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            pool, report = import_uploaded_pool(values["file"], campaign=campaign, name=values["name"],
                                                purpose=values["purpose"], split_rule=values["split_rule"],
                                                user=request.user)
        except ImportFailed as exc:
            return Response({"file": [str(exc)], "report": exc.report.as_dict()}, status=status.HTTP_400_BAD_REQUEST)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            return Response({field if message else "file": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        pool.refresh_from_db()
        return Response({**PoolOut(pool).data, "report": report.as_dict()}, status=status.HTTP_201_CREATED)


class ScoringJobOut(serializers.ModelSerializer):
    class Meta:
        model = ScoringJob
        fields = ("id", "reward_model", "pool", "backend", "status", "progress", "step_metrics", "error",
                  "created_at", "started_at", "finished_at")


class StartScoringInput(serializers.Serializer):
    pool = serializers.IntegerField(help_text="A candidate pool of this campaign.")
    reward_models = serializers.ListField(child=serializers.IntegerField(), min_length=1,
                                          help_text="Reward models of this campaign: one scoring job each.")
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.LOCAL)


class ScoringJobsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: ScoringJobOut(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        """Scoring jobs of the campaign's models, newest first (at most 100)."""
        campaign = _campaign(request, slug)
        return Response(ScoringJobOut(ScoringJob.objects.filter(reward_model__campaign=campaign)
                                      .order_by("-created_at", "-id")[:100], many=True).data)

    @extend_schema(request=StartScoringInput, responses={201: ScoringJobOut(many=True)})
    def post(self, request: Request, slug: str) -> Response:
        """Score a pool with the chosen models (queued; a worker runs each job)."""
        campaign = _campaign(request, slug)
        data = StartScoringInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        pool = CandidatePool.objects.filter(pk=values["pool"], campaign=campaign).first()
        if pool is None:
            raise ValidationError({"pool": [f"no candidate pool {values['pool']} in campaign {slug}"]})
        models = {m.pk: m for m in RewardModel.objects.filter(pk__in=values["reward_models"], campaign=campaign)}
        missing = [pk for pk in values["reward_models"] if pk not in models]
        if missing:
            raise ValidationError({"reward_models": [f"no reward model {pk} in campaign {slug}" for pk in missing]})
        try:
            jobs = [start_scoring_job(models[pk], pool, backend=values["backend"], user=request.user)
                    for pk in values["reward_models"]]
        except JobInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(ScoringJobOut(jobs, many=True).data, status=status.HTTP_201_CREATED)


def _scoring_job(request: Request, pk: int) -> ScoringJob:
    _require_area(request)
    job = ScoringJob.objects.select_related("reward_model__campaign").filter(pk=pk).first()
    if job is None or not can_access(request.user, job.reward_model.campaign):
        raise NotFound("no such scoring job")
    return job


class ScoringJobView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: ScoringJobOut})
    def get(self, request: Request, pk: int) -> Response:
        """One scoring job: status, progress, the PRM's held-out step figures, error."""
        return Response(ScoringJobOut(_scoring_job(request, pk)).data)


class ScoringJobCancelView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(request=None, responses={200: ScoringJobOut})
    def post(self, request: Request, pk: int) -> Response:
        """Cancel a scoring job (a running one when its watcher next polls)."""
        request_cancel(_scoring_job(request, pk))
        return Response(ScoringJobOut(_scoring_job(request, pk)).data)


class EvaluateInput(serializers.Serializer):
    prm_scoring = serializers.IntegerField(required=False, allow_null=True, default=None)
    orm_scoring = serializers.IntegerField(required=False, allow_null=True, default=None)
    aggregation = serializers.ChoiceField(choices=["product", "min"], default="product")
    trials = serializers.IntegerField(min_value=1, max_value=100_000, default=400)


class EvaluationsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(request=EvaluateInput, responses={201: dict})
    def post(self, request: Request, slug: str) -> Response:
        """Best-of-N (PRM, ORM, majority vote, pass@N) of a pool from its succeeded scorings, computed now."""
        campaign = _campaign(request, slug)
        data = EvaluateInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = evaluate_scorings(campaign, user=request.user, **data.validated_data)
        except JobInputError as exc:
            return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"id": run.pk, "pool": run.pool_id, "prm_scoring": run.prm_scoring_id,
                         "orm_scoring": run.orm_scoring_id, "best_of_n": selectors.best_of_n_rows(run),
                         "step_metrics": run.step_metrics}, status=status.HTTP_201_CREATED)


class ComparisonOut(serializers.ModelSerializer):
    campaign: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    best_of_n = serializers.SerializerMethodField()

    class Meta:
        model = ComparisonRun
        fields = ("id", "campaign", "status", "stage", "max_steps", "per_problem", "base_model", "source_pool", "pool",
                  "dataset_version",
                  "new_version", "prm_job", "orm_job", "prm_scoring", "orm_scoring", "evaluation", "error",
                  "best_of_n", "created_at", "started_at", "finished_at")

    def get_best_of_n(self, run: ComparisonRun) -> list[dict[str, Any]]:
        return selectors.best_of_n_rows(run.evaluation) if run.evaluation is not None else []


class StartComparisonInput(serializers.Serializer):
    max_steps = serializers.IntegerField(min_value=1, max_value=MAX_MAX_STEPS, default=DEFAULT_MAX_STEPS,
                                         help_text="Optimizer steps per model (the budget).")
    base_model = serializers.CharField(default="default")
    per_problem = serializers.IntegerField(min_value=0, default=DEFAULT_PER_PROBLEM,
                                           help_text="Candidates scored per problem (the first k; 0 = all).")


class ComparisonsView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: ComparisonOut(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        """The campaign's comparisons, newest first."""
        campaign = _campaign(request, slug)
        runs = ComparisonRun.objects.filter(campaign=campaign).select_related("campaign", "evaluation")[:50]
        return Response(ComparisonOut(runs, many=True).data)

    @extend_schema(request=StartComparisonInput, responses={201: ComparisonOut})
    def post(self, request: Request, slug: str) -> Response:
        """Compare PRM and ORM: snapshot → train both (same backbone and budget) → score the pool → evaluate.
        409 while another comparison of the campaign runs."""
        campaign = _campaign(request, slug)
        data = StartComparisonInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = start_comparison(campaign, user=request.user, **data.validated_data)
        except JobInputError as exc:
            code = status.HTTP_409_CONFLICT if exc.field == "campaign" else status.HTTP_400_BAD_REQUEST
            return Response({exc.field: [str(exc)]}, status=code)
        return Response(ComparisonOut(run).data, status=status.HTTP_201_CREATED)


def _comparison(request: Request, pk: int) -> ComparisonRun:
    _require_area(request)
    run = ComparisonRun.objects.select_related("campaign", "evaluation").filter(pk=pk).first()
    if run is None or not can_access(request.user, run.campaign):
        raise NotFound("no such comparison")
    return run


class ComparisonView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(responses={200: ComparisonOut})
    def get(self, request: Request, pk: int) -> Response:
        """One comparison: status, stage, the jobs it started, the failure reason, best-of-N once done."""
        return Response(ComparisonOut(_comparison(request, pk)).data)


class ComparisonCancelView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = PERMISSIONS

    @extend_schema(request=None, responses={200: ComparisonOut})
    def post(self, request: Request, pk: int) -> Response:
        """Cancel a comparison and the jobs it started."""
        request_cancel_comparison(_comparison(request, pk))
        return Response(ComparisonOut(_comparison(request, pk)).data)

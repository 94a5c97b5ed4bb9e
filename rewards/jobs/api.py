"""REST endpoints of reward-model work under /api/, the same services as the pages.

* ``GET/POST /api/jobs/`` — training jobs: list (``?campaign=ID&status=``), start one; ``GET /api/jobs/<id>/``
  (progress, loss curve, metrics, error, the registered model); ``POST /api/jobs/<id>/cancel/``.
* The loop: ``POST /api/campaigns/<id>/snapshot/`` (a dataset version), ``GET/POST …/campaigns/<id>/pools/``
  (upload, multipart), ``GET/POST …/campaigns/<id>/scoring/``, ``GET /api/scoring/<id>/`` and
  ``POST /api/scoring/<id>/cancel/``, ``POST …/campaigns/<id>/evaluations/``, ``GET/POST …/campaigns/<id>/comparisons/``
  (one-click PRM vs ORM), ``GET /api/comparisons/<id>/``, ``POST /api/comparisons/<id>/cancel/``.
* ``GET/POST /api/campaigns/<id>/generations/`` — a campaign's generations, start the next one;
  ``GET/POST /api/campaigns/<id>/sampling/`` — sampling jobs.

Who may: staff and the campaign's admins and researchers read and run the work; starting generations and sampling
is for staff and its admins (``annotate.permissions``). Everyone else gets 404 for the campaign or job (its
existence is not revealed), or 403 when they may read but not start. Authentication, scopes and pagination are the
settings' (as for the rest of /api/). Errors: ``{field: [messages]}`` for the input at fault, ``{"detail": message}``
otherwise.

``/models/api/…`` (the same paths with the campaign's slug in place of its id) are kept for existing scripts:
same views with ``legacy=True`` — campaigns by slug in paths, filters and answers, lists unpaginated and cut at
their old lengths — left out of the schema.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, cast

from django.db.models import QuerySet
from django.urls import URLPattern, path
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from annotate.models import Campaign
from annotate.permissions import can_research, can_research_any, can_start_labeling_round, is_staff, research_campaigns
from annotate.services.importing import ImportFailed
from rewards.active import STRATEGIES
from rewards.models import DatasetVersion
from steplab.jsonlimits import MAX_ID  # a larger id is a 400 naming the field, not a database error

from . import models, selectors
from .services.comparisons import (
    DEFAULT_MAX_STEPS,
    DEFAULT_PER_PROBLEM,
    MAX_MAX_STEPS,
    MAX_PER_PROBLEM,
    request_cancel_comparison,
    snapshot_labels,
    start_comparison,
)
from .services.evaluation import evaluate_scorings
from .services.labeling_rounds import MAX_BATCH_SIZE, LabelingRoundNotAllowed, start_labeling_round
from .services.machine_labeling import (
    DEFAULT_SOLUTIONS,
    MAX_SOLUTIONS,
    MC_KEYS,
    missing_reward_model,
    start_machine_labeling_job,
)
from .services.pools import import_uploaded_pool
from .services.sampling import USER_KEYS as SAMPLING_KEYS
from .services.sampling import start_sampling_job
from .services.scoring import start_scoring_job
from .services.training import USER_KEYS, JobInputError, TrainingRequest, backbones, request_cancel, start_training_job
from .text import shown


@extend_schema_field(OpenApiTypes.INT)
class CampaignRef(serializers.Field):
    """The campaign's id; its slug at the /models/api/ aliases (``legacy`` in the serializer's context)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, campaign: Campaign) -> int | str:
        return campaign.slug if self.context.get("legacy") else campaign.pk


# A row of one campaign's, which names it as a CampaignRef. No docstring: the schema would give it to every
# serializer below as its description.
class CampaignRowOut(serializers.ModelSerializer):
    campaign = CampaignRef()


class JobsSchema(AutoSchema):
    """Only GET lists are paginated: a POST that starts several jobs answers them as a plain list. A one-job view
    answers its ``output`` serializer."""

    def _get_paginator(self) -> Any:
        return super()._get_paginator() if self.method == "GET" else None

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "output", None)
        return {200: output} if output is not None else super().get_response_serializers()


def _settings(about: str, keys: Iterable[str]) -> serializers.DictField:
    """A job's settings as given (its service checks them): ``about`` them, and the keys it takes."""
    return serializers.DictField(required=False, default=dict, help_text=f"{about}: {', '.join(keys)}.")


def _input_error(exc: JobInputError, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({exc.field: [str(exc)]}, status=code)


class JobsApiView(APIView):
    """Campaigns by id and lists paginated with the settings' class; ``legacy`` serves the /models/api/ aliases.

    A plain APIView, not a GenericAPIView: its views have no one serializer, and the browsable API and OPTIONS
    would ask a GenericAPIView for one."""

    legacy = False
    schema = JobsSchema()
    # The schema documents GET lists with it too; the settings hold the class itself (DRF imports the path).
    pagination_class = cast(type[BasePagination], api_settings.DEFAULT_PAGINATION_CLASS)

    def campaign(self, key: dict[str, Any], *, start: str = "") -> Campaign:
        """The campaign named in the path, if the user may work on it (404 otherwise: existence is not revealed);
        to ``start`` a generation or a sampling job they must also be staff or its admin (403 naming ``start``)."""
        lookup = {"slug": key["slug"]} if self.legacy else {"pk": key["campaign_id"]}
        campaign = Campaign.objects.filter(**lookup).first()
        if campaign is None or not can_research(self.request.user, campaign):
            raise NotFound("no such campaign")
        if start and not can_start_labeling_round(self.request.user, campaign):
            raise PermissionDenied(f"only staff and the campaign's admins start {start}")
        return campaign

    def valid(self, serializer: type[serializers.Serializer]) -> dict[str, Any]:
        """The request body's values as ``serializer`` cleans them (400 naming the fields at fault)."""
        data = serializer(data=self.request.data)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def out(self, serializer: type[serializers.BaseSerializer], instance: Any, *, many: bool = False) -> Any:
        """``instance`` as ``serializer`` writes it, with the server's folders taken off every path in it."""
        return shown(serializer(instance, many=many, context={"request": self.request, "legacy": self.legacy}).data)

    def listing(self, rows: QuerySet[Any], output: type[serializers.BaseSerializer], *, cut: int | None = None,
                extend: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Response:
        """One page of ``rows`` as ``output`` renders them (``?limit=&offset=``), each row ``extend``-ed when given;
        at the aliases, the first ``cut`` rows as a plain list."""
        def render(page: Iterable[Any]) -> list[Any]:
            answered = self.out(output, page, many=True)
            return [extend(row) for row in answered] if extend is not None else answered

        if self.legacy:
            return Response(render(rows[:cut] if cut is not None else rows))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, self.request, view=self)
        return paginator.get_paginated_response(render(page if page is not None else rows))


class OneJobView(JobsApiView):
    """The views of one job by id (``one_job_views``): the job of ``rows`` with that id, if the user may work on
    its ``campaign_of`` (404 ``missing`` otherwise: its existence is not revealed), answered as ``output`` (the
    schema's 200 too); the class's docstring describes the operation."""

    rows: ClassVar[QuerySet[Any]]
    campaign_of: ClassVar[Callable[[Any], Campaign | None]]
    missing: ClassVar[str]
    output: ClassVar[type[serializers.BaseSerializer]]

    def answer(self, pk: int) -> Response:
        return Response(self.out(self.output, self.find(pk)))

    def find(self, pk: int) -> Any:
        _require_area(self.request)
        job = self.rows.filter(pk=pk).first()
        if job is None or not can_research(self.request.user, type(self).campaign_of(job)):
            raise NotFound(self.missing)
        return job


class JobDetailView(OneJobView):
    def get(self, request: Request, pk: int) -> Response:
        return self.answer(pk)


class JobCancelView(OneJobView):
    #: the service that cancels it (a queued one at once, a running one when its watcher next polls)
    cancel: ClassVar[Callable[[Any], object]]

    @extend_schema(request=None)
    def post(self, request: Request, pk: int) -> Response:
        type(self).cancel(self.find(pk))
        return self.answer(pk)  # read again: the cancel wrote the status


def one_job_views(*, rows: QuerySet[Any], campaign_of: Callable[[Any], Campaign | None], missing: str,
                  output: type[serializers.BaseSerializer], cancel: Callable[[Any], object], about: str,
                  about_cancel: str) -> tuple[type[JobDetailView], type[JobCancelView]]:
    """The GET view of one kind of job and its cancel POST; ``about``, ``about_cancel``: what each answers (the
    schema's descriptions)."""
    shared = {"__module__": __name__, "rows": rows, "campaign_of": staticmethod(campaign_of), "missing": missing,
              "output": output}
    name = output.__name__.removesuffix("Out")
    return (type(f"{name}View", (JobDetailView,), {**shared, "__doc__": about}),
            type(f"{name}CancelView", (JobCancelView,), {**shared, "__doc__": about_cancel,
                                                          "cancel": staticmethod(cancel)}))


class CampaignJobsView(JobsApiView):
    """A campaign's launched jobs of one kind, ``job_output``'s model: GET lists them, newest first; POST starts
    one from ``start_input`` with ``start_job`` (staff and the campaign's admins only), answered as ``job_output``.
    ``about``, ``about_start``: what each operation does (the schema's descriptions)."""

    job_output: ClassVar[type[serializers.ModelSerializer[Any]]]
    start_input: ClassVar[type[serializers.Serializer]]
    about: ClassVar[str]
    about_start: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(description=cls.about, responses={200: cls.job_output(many=True)}),
            post=extend_schema(description=cls.about_start, request=cls.start_input, responses={201: cls.job_output}),
        )(cls)

    @property
    def model(self) -> type[models.SamplingJob | models.MachineLabelingJob]:
        """The kind's model (``job_output``'s)."""
        return self.job_output.Meta.model

    def get(self, request: Request, **key: Any) -> Response:
        campaign = self.campaign(key)
        jobs = self.model._default_manager.filter(campaign=campaign).select_related("campaign")
        return self.listing(jobs, self.job_output, cut=100)

    def post(self, request: Request, **key: Any) -> Response:
        campaign = self.campaign(key, start=str(self.model._meta.verbose_name_plural))
        values = self.valid(self.start_input)
        try:
            job = self.start_job(campaign, values)
        except JobInputError as exc:
            return _input_error(exc)
        return Response(self.out(self.job_output, job), status=status.HTTP_201_CREATED)

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        raise NotImplementedError


class StartGenerationInput(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES))
    batch_size = serializers.IntegerField(min_value=1, max_value=MAX_BATCH_SIZE)
    config = serializers.DictField(required=False, default=dict, help_text="Strategy options, e.g. max_per_problem.")
    pool = serializers.IntegerField(required=False, max_value=MAX_ID,
                                    help_text="Candidate pool id (default: the campaign's newest labeling pool).")
    reward_model = serializers.IntegerField(required=False, max_value=MAX_ID,
                                            help_text="PRM id (default: the campaign's best PRM).")


class GenerationOut(CampaignRowOut):
    class Meta:
        model = models.LabelingRound
        fields = ("id", "campaign", "number", "status", "strategy", "strategy_config", "batch_size", "selected_count",
                  "pool", "reward_model", "dataset_version", "scoring_job", "auto_started", "error", "created_at",
                  "finished_at")


class GenerationsView(JobsApiView):
    @extend_schema(responses={200: GenerationOut(many=True)})
    def get(self, request: Request, **key: Any) -> Response:
        """The campaign's generations with their figures (selected, labeled, found-error share, retrained PRM)."""
        campaign = self.campaign(key)
        figures = {row["id"]: row for row in selectors.labeling_round_rows(campaign)}
        return self.listing(
            models.LabelingRound.objects.filter(campaign=campaign).select_related("campaign").order_by("number", "id"),
            GenerationOut, extend=lambda row: {**row, "figures": figures.get(row["id"])})

    @extend_schema(request=StartGenerationInput, responses={201: GenerationOut})
    def post(self, request: Request, **key: Any) -> Response:
        """Start the next generation (admins and staff): score the pool with the PRM, then select a batch."""
        campaign = self.campaign(key, start="generations")
        values = self.valid(StartGenerationInput)
        pool = model = None
        if "pool" in values:
            pool = models.CandidatePool.objects.filter(pk=values["pool"], campaign=campaign,
                                                purpose=models.PoolPurpose.LABELING).first()
            if pool is None:
                raise ValidationError({"pool": [f"no labeling pool {values['pool']} in campaign {campaign.slug}"]})
        if "reward_model" in values:
            model = models.RewardModel.objects.filter(pk=values["reward_model"], campaign=campaign).first()
            if model is None:
                raise ValidationError({"reward_model": [
                    f"no reward model {values['reward_model']} in campaign {campaign.slug}"]})
        try:
            generation = start_labeling_round(campaign, strategy=values["strategy"],
                                              batch_size=values["batch_size"], config=values["config"],
                                              user=request.user, pool=pool, reward_model=model)
        except LabelingRoundNotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except JobInputError as exc:
            return _input_error(exc, status.HTTP_409_CONFLICT if exc.field == "campaign" else
                                status.HTTP_400_BAD_REQUEST)
        return Response(self.out(GenerationOut, generation), status=status.HTTP_201_CREATED)


# --- training jobs ------------------------------------------------------------------------------------

class StartTrainingInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=models.Kind.choices)
    dataset_version = serializers.IntegerField(max_value=MAX_ID,
                                               help_text="A ready dataset version of a campaign you work on.")
    base_model = serializers.CharField(default="default", help_text="'default' (CPU MiniLM) or a configured backbone.")
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    hyper = _settings("Trainer settings", USER_KEYS)


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


def _require_area(request: Request) -> None:
    if not can_research_any(request.user):
        raise PermissionDenied("reward models are for campaign admins, researchers and staff")


def _visible_jobs(request: Request) -> Any:
    _require_area(request)
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
        _require_area(request)
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
            return _input_error(exc)
        return Response(self.out(TrainingJobOut, job), status=status.HTTP_201_CREATED)


TrainingJobView, TrainingJobCancelView = one_job_views(
    rows=models.TrainingJob.objects.select_related("campaign", "reward_model"),
    campaign_of=lambda job: job.campaign, missing="no such job", output=TrainingJobOut, cancel=request_cancel,
    about="One job: status, progress, loss curve, final metrics, error and log tail, the registered model.",
    about_cancel="Cancel: a queued job at once, a running one when its watcher next polls (it stops the process).")


# --- sampling jobs ------------------------------------------------------------------------------------

class StartSamplingInput(serializers.Serializer):
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)
    config = _settings("Sampler settings", SAMPLING_KEYS)


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

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        return start_sampling_job(campaign, values["config"], backend=values["backend"], user=self.request.user)


# --- machine labeling jobs ----------------------------------------------------------------------------

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
    config = _settings("method mc: rollout settings", MC_KEYS)


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

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        reward_model = None
        if values["reward_model"] is not None:
            reward_model = models.RewardModel.objects.filter(pk=values["reward_model"]).first()
            if reward_model is None:
                raise JobInputError("reward_model", missing_reward_model(values["reward_model"], campaign))
        return start_machine_labeling_job(
            campaign=campaign, method=values["method"], limit=values["solutions"],
            solution_ids=values["solution_ids"], reward_model=reward_model, config=values["config"],
            backend=values["backend"], user=self.request.user)


# --- the loop: dataset versions, pools, scoring, evaluation, one-click comparison ---------------------

class DatasetVersionOut(CampaignRowOut):
    class Meta:
        model = DatasetVersion
        fields = ("id", "campaign", "number", "status", "content_sha256", "counts", "files", "created_at")


class SnapshotView(JobsApiView):
    @extend_schema(request=None, responses={201: DatasetVersionOut, 200: DatasetVersionOut})
    def post(self, request: Request, **key: Any) -> Response:
        """Snapshot the campaign's labels: 201 with the new version, or 200 with the latest one when the labels
        have not changed since (``new`` says which)."""
        version, new = snapshot_labels(self.campaign(key), user=request.user)
        return Response({**self.out(DatasetVersionOut, version), "new": new},
                        status=status.HTTP_201_CREATED if new else status.HTTP_200_OK)


class PoolOut(serializers.ModelSerializer):
    campaign = CampaignRef(allow_null=True)

    class Meta:
        model = models.CandidatePool
        fields = ("id", "name", "campaign", "purpose", "source", "split_rule", "problem_count", "candidate_count",
                  "pool_size", "created_at")


class UploadPoolInput(serializers.Serializer):
    file = serializers.FileField(help_text="JSONL pool file (see the pool upload page for the two layouts).")
    name = serializers.CharField(required=False, default="", allow_blank=True)
    purpose = serializers.ChoiceField(choices=models.PoolPurpose.choices, default=models.PoolPurpose.EVALUATION)
    split_rule = serializers.ChoiceField(choices=["auto", "lines", "paragraphs"], default="auto")


class PoolsView(JobsApiView):
    @extend_schema(responses={200: PoolOut(many=True)})
    def get(self, request: Request, **key: Any) -> Response:
        """The campaign's candidate pools, newest first."""
        campaign = self.campaign(key)
        return self.listing(models.CandidatePool.objects.filter(campaign=campaign).select_related("campaign")
                            .order_by("-created_at", "-id"), PoolOut, cut=100)

    @extend_schema(request={"multipart/form-data": UploadPoolInput}, responses={201: PoolOut})
    def post(self, request: Request, **key: Any) -> Response:
        """Upload a pool file (multipart): imported and graded (201 with the counts), or 400 listing every bad
        line (file, line, field) with nothing saved."""
        campaign = self.campaign(key)
        values = self.valid(UploadPoolInput)
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
        return Response({**self.out(PoolOut, pool), "report": report.as_dict()}, status=status.HTTP_201_CREATED)


class ScoringJobOut(serializers.ModelSerializer):
    class Meta:
        model = models.ScoringJob
        fields = ("id", "reward_model", "pool", "backend", "status", "progress", "step_metrics", "error",
                  "created_at", "started_at", "finished_at")


class StartScoringInput(serializers.Serializer):
    pool = serializers.IntegerField(max_value=MAX_ID, help_text="A candidate pool of this campaign.")
    reward_models = serializers.ListField(child=serializers.IntegerField(max_value=MAX_ID), min_length=1,
                                          help_text="Reward models of this campaign: one scoring job each.")
    backend = serializers.ChoiceField(choices=models.BackendKind.choices, default=models.BackendKind.LOCAL)


class ScoringJobsView(JobsApiView):
    @extend_schema(responses={200: ScoringJobOut(many=True)})
    def get(self, request: Request, **key: Any) -> Response:
        """Scoring jobs of the campaign's models, newest first."""
        campaign = self.campaign(key)
        return self.listing(models.ScoringJob.objects.filter(reward_model__campaign=campaign), ScoringJobOut, cut=100)

    @extend_schema(request=StartScoringInput, responses={201: ScoringJobOut(many=True)})
    def post(self, request: Request, **key: Any) -> Response:
        """Score a pool with the chosen models (queued; a worker runs each job)."""
        campaign = self.campaign(key)
        values = self.valid(StartScoringInput)
        pool = models.CandidatePool.objects.filter(pk=values["pool"], campaign=campaign).first()
        if pool is None:
            raise ValidationError({"pool": [f"no candidate pool {values['pool']} in campaign {campaign.slug}"]})
        chosen = {m.pk: m for m in models.RewardModel.objects.filter(pk__in=values["reward_models"], campaign=campaign)}
        missing = [pk for pk in values["reward_models"] if pk not in chosen]
        if missing:
            raise ValidationError({"reward_models": [f"no reward model {pk} in campaign {campaign.slug}"
                                                     for pk in missing]})
        try:
            jobs = [start_scoring_job(chosen[pk], pool, backend=values["backend"], user=request.user)
                    for pk in values["reward_models"]]
        except JobInputError as exc:
            return _input_error(exc)
        return Response(self.out(ScoringJobOut, jobs, many=True), status=status.HTTP_201_CREATED)


ScoringJobView, ScoringJobCancelView = one_job_views(
    rows=models.ScoringJob.objects.select_related("reward_model__campaign"),
    campaign_of=lambda job: job.reward_model.campaign, missing="no such scoring job", output=ScoringJobOut,
    cancel=request_cancel,
    about="One scoring job: status, progress, the PRM's held-out step figures, error.",
    about_cancel="Cancel a scoring job (a running one when its watcher next polls).")


class EvaluateInput(serializers.Serializer):
    prm_scoring = serializers.IntegerField(required=False, allow_null=True, default=None, max_value=MAX_ID)
    orm_scoring = serializers.IntegerField(required=False, allow_null=True, default=None, max_value=MAX_ID)
    aggregation = serializers.ChoiceField(choices=["product", "min"], default="product")
    trials = serializers.IntegerField(min_value=1, max_value=100_000, default=400)


class EvaluationsView(JobsApiView):
    @extend_schema(request=EvaluateInput, responses={201: dict})
    def post(self, request: Request, **key: Any) -> Response:
        """Best-of-N (PRM, ORM, majority vote, pass@N) of a pool from its succeeded scorings, computed now."""
        campaign = self.campaign(key)
        values = self.valid(EvaluateInput)
        try:
            run = evaluate_scorings(campaign, user=request.user, **values)
        except JobInputError as exc:
            return _input_error(exc)
        return Response({"id": run.pk, "pool": run.pool_id, "prm_scoring": run.prm_scoring_id,
                         "orm_scoring": run.orm_scoring_id, "best_of_n": selectors.best_of_n_rows(run),
                         "step_metrics": run.step_metrics}, status=status.HTTP_201_CREATED)


class ComparisonOut(CampaignRowOut):
    best_of_n = serializers.SerializerMethodField()

    class Meta:
        model = models.ComparisonRun
        fields = ("id", "campaign", "status", "stage", "max_steps", "per_problem", "base_model", "source_pool", "pool",
                  "dataset_version",
                  "new_version", "prm_job", "orm_job", "prm_scoring", "orm_scoring", "evaluation", "error",
                  "best_of_n", "created_at", "started_at", "finished_at")

    def get_best_of_n(self, run: models.ComparisonRun) -> list[dict[str, Any]]:
        return selectors.best_of_n_rows(run.evaluation) if run.evaluation is not None else []


class StartComparisonInput(serializers.Serializer):
    max_steps = serializers.IntegerField(min_value=1, max_value=MAX_MAX_STEPS, default=DEFAULT_MAX_STEPS,
                                         help_text="Optimizer steps per model (the budget).")
    base_model = serializers.CharField(default="default")
    per_problem = serializers.IntegerField(min_value=0, max_value=MAX_PER_PROBLEM, default=DEFAULT_PER_PROBLEM,
                                           help_text="Candidates scored per problem (the first k; 0 = all).")


class ComparisonsView(JobsApiView):
    @extend_schema(responses={200: ComparisonOut(many=True)})
    def get(self, request: Request, **key: Any) -> Response:
        """The campaign's comparisons, newest first."""
        campaign = self.campaign(key)
        return self.listing(models.ComparisonRun.objects.filter(campaign=campaign)
                            .select_related("campaign", "evaluation"), ComparisonOut, cut=50)

    @extend_schema(request=StartComparisonInput, responses={201: ComparisonOut})
    def post(self, request: Request, **key: Any) -> Response:
        """Compare PRM and ORM: snapshot → train both (same backbone and budget) → score the pool → evaluate.
        409 while another comparison of the campaign runs."""
        campaign = self.campaign(key)
        values = self.valid(StartComparisonInput)
        try:
            run = start_comparison(campaign, user=request.user, **values)
        except JobInputError as exc:
            code = status.HTTP_409_CONFLICT if exc.field == "campaign" else status.HTTP_400_BAD_REQUEST
            return Response({exc.field: [str(exc)]}, status=code)
        return Response(self.out(ComparisonOut, run), status=status.HTTP_201_CREATED)


ComparisonView, ComparisonCancelView = one_job_views(
    rows=models.ComparisonRun.objects.select_related("campaign", "evaluation"),
    campaign_of=lambda run: run.campaign, missing="no such comparison", output=ComparisonOut,
    cancel=request_cancel_comparison,
    about="One comparison: status, stage, the jobs it started, the failure reason, best-of-N once done.",
    about_cancel="Cancel a comparison and the jobs it started.")


ROUTES: list[tuple[str, type[JobsApiView], str]] = [  # (path, view, name), ``{campaign}`` in the path
    ("campaigns/{campaign}/generations/", GenerationsView, "generations"),
    ("campaigns/{campaign}/sampling/", SamplingJobsView, "sampling"),
    ("campaigns/{campaign}/machine-labeling/", MachineLabelingJobsView, "machine_labeling"),
    ("campaigns/{campaign}/snapshot/", SnapshotView, "snapshot"),
    ("campaigns/{campaign}/pools/", PoolsView, "pools"),
    ("campaigns/{campaign}/scoring/", ScoringJobsView, "scoring"),
    ("campaigns/{campaign}/evaluations/", EvaluationsView, "evaluations"),
    ("campaigns/{campaign}/comparisons/", ComparisonsView, "comparisons"),
    ("scoring/<int:pk>/", ScoringJobView, "scoring_job"),
    ("scoring/<int:pk>/cancel/", ScoringJobCancelView, "scoring_job_cancel"),
    ("comparisons/<int:pk>/", ComparisonView, "comparison"),
    ("comparisons/<int:pk>/cancel/", ComparisonCancelView, "comparison_cancel"),
    ("jobs/", TrainingJobsView, "jobs"),
    ("jobs/<int:pk>/", TrainingJobView, "job"),
    ("jobs/<int:pk>/cancel/", TrainingJobCancelView, "job_cancel"),
]


def urls(*, legacy: bool = False) -> list[URLPattern]:
    """The routes under /api/ (names like ``scoring-job-cancel``), or, ``legacy``, the /models/api/ aliases
    under their old names (``api_scoring_job_cancel``): campaigns by slug, out of the schema."""
    if legacy:
        return [path("api/" + route.format(campaign="<slug:slug>"), view.as_view(legacy=True, schema=None),
                     name=f"api_{name}") for route, view, name in ROUTES]
    return [path(route.format(campaign="<int:campaign_id>"), view.as_view(), name=name.replace("_", "-"))
            for route, view, name in ROUTES]

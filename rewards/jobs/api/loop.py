"""The loop: dataset versions (snapshot), candidate pools, scoring, evaluation, the one-click comparison."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.services.importing import ImportFailed
from annotate.step_rule_validation import validate_step_rule
from rewards.models import DatasetVersion
from stepcore.steprules import MAX_RULE_CHARS, STEP_RULE_DETAIL
from steplab.jsonlimits import MAX_ID

from .. import models, selectors
from ..services.comparisons import (
    DEFAULT_MAX_STEPS,
    DEFAULT_PER_PROBLEM,
    MAX_MAX_STEPS,
    MAX_PER_PROBLEM,
    request_cancel_comparison,
    snapshot_labels,
    start_comparison,
)
from ..services.evaluation import evaluate_scorings
from ..services.pools import import_uploaded_pool
from ..services.scoring import start_scoring_job
from ..services.training import JobInputError, request_cancel
from .base import (
    CampaignRef,
    CampaignRowOut,
    JobsApiView,
    input_error,
    one_job_views,
)


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
    split_rule = serializers.CharField(default="auto", max_length=MAX_RULE_CHARS, validators=[validate_step_rule],
                                       help_text=f"How candidates given as text are cut into steps: {STEP_RULE_DETAIL}")


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
            jobs = [start_scoring_job(chosen[pk], pool=pool, backend=values["backend"], user=request.user)
                    for pk in values["reward_models"]]
        except JobInputError as exc:
            return input_error(exc)
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
            return input_error(exc)
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
    pool = serializers.IntegerField(required=False, allow_null=True, default=None, max_value=MAX_ID,
                                    help_text="The campaign's pool to score (default: its default pool, else the "
                                              "largest).")


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

"""REST endpoints of active learning: list a campaign's generations, start the next one.

``GET/POST /models/api/campaigns/<slug>/generations/``. Session or personal API token (a write-scoped
token to POST). Reading: staff and the campaign's admins/researchers; starting: staff and its admins.
Everyone else gets 404 for the campaign (its existence is not revealed) or 403 when they may read it.
"""
from __future__ import annotations

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
from .models import CandidatePool, Generation, PoolPurpose, RewardModel
from .services.access import can_access
from .services.generations import GenerationNotAllowed, can_start_generation, start_generation
from .services.training import JobInputError

AUTHENTICATION = [ApiTokenAuthentication, SessionAuthentication]
PERMISSIONS = [IsAuthenticated, TokenScope]


class StartGenerationInput(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES))
    batch_size = serializers.IntegerField(min_value=1)
    config = serializers.DictField(required=False, default=dict, help_text="Strategy options, e.g. max_per_problem.")
    pool = serializers.IntegerField(required=False, help_text="Candidate pool id (default: the campaign's newest "
                                                              "labeling pool).")
    reward_model = serializers.IntegerField(required=False, help_text="PRM id (default: the campaign's best PRM).")


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

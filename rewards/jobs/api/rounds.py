"""Labeling rounds: list a campaign's, start the next one (``labeling-rounds/``; ``generations/`` is its
deprecated alias)."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer, extend_schema_view
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from rewards.active import STRATEGIES
from steplab.jsonlimits import MAX_ID

from .. import models, selectors
from ..services.labeling_rounds import MAX_BATCH_SIZE, LabelingRoundNotAllowed, start_labeling_round
from ..services.training import JobInputError
from .base import (
    CampaignRowOut,
    JobsApiView,
    input_error,
)


# The schema keeps the components' first names (clients generated from it keep their types): only the code moved
# to the labeling round's words.
@extend_schema_serializer(component_name="StartGenerationInput")
class StartLabelingRoundInput(serializers.Serializer):
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES))
    batch_size = serializers.IntegerField(min_value=1, max_value=MAX_BATCH_SIZE)
    config = serializers.DictField(required=False, default=dict, help_text="Strategy options, e.g. max_per_problem.")
    pool = serializers.IntegerField(required=False, max_value=MAX_ID,
                                    help_text="Candidate pool id (default: the campaign's newest labeling pool).")
    reward_model = serializers.IntegerField(required=False, max_value=MAX_ID,
                                            help_text="PRM id (default: the campaign's best PRM).")


@extend_schema_serializer(component_name="GenerationOut")
class LabelingRoundOut(CampaignRowOut):
    class Meta:
        model = models.LabelingRound
        fields = ("id", "campaign", "number", "status", "strategy", "strategy_config", "batch_size", "selected_count",
                  "pool", "reward_model", "dataset_version", "scoring_job", "auto_started", "error", "created_at",
                  "finished_at")


class LabelingRoundsView(JobsApiView):
    @extend_schema(responses={200: LabelingRoundOut(many=True)})
    def get(self, request: Request, **key: Any) -> Response:
        """The campaign's labeling rounds with their figures (selected, labeled, found-error share, retrained
        PRM)."""
        campaign = self.campaign(key)
        figures = {row["id"]: row for row in selectors.labeling_round_rows(campaign)}
        return self.listing(
            models.LabelingRound.objects.filter(campaign=campaign).select_related("campaign").order_by("number", "id"),
            LabelingRoundOut, extend=lambda row: {**row, "figures": figures.get(row["id"])})

    @extend_schema(request=StartLabelingRoundInput, responses={201: LabelingRoundOut})
    def post(self, request: Request, **key: Any) -> Response:
        """Start the next labeling round (admins and staff): score the pool with the PRM, then select a batch."""
        campaign = self.campaign(key, start="generations")
        values = self.valid(StartLabelingRoundInput)
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
            labeling_round = start_labeling_round(campaign, strategy=values["strategy"],
                                                  batch_size=values["batch_size"], config=values["config"],
                                                  user=request.user, pool=pool, reward_model=model)
        except LabelingRoundNotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except JobInputError as exc:
            return input_error(exc, status.HTTP_409_CONFLICT if exc.field == "campaign" else
                                status.HTTP_400_BAD_REQUEST)
        return Response(self.out(LabelingRoundOut, labeling_round), status=status.HTTP_201_CREATED)


DEPRECATED = ("Deprecated: the old name of ``campaigns/{campaign}/labeling-rounds/`` (same answers), kept for existing "
              "scripts.")


@extend_schema_view(get=extend_schema(deprecated=True, description=DEPRECATED),
                    post=extend_schema(deprecated=True, description=DEPRECATED))
class GenerationsView(LabelingRoundsView):
    """``generations/``: the labeling rounds' first route."""

"""Input and output of the whole-solution labeling endpoints (one assignment's labeling, several at once)."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotate.models import FinishReason
from annotate.services.whole_labeling import LabelingInput, StepLabel

from ..scales import RATING_MAX, RATING_MIN
from .serializers import SMALL_INT, AssignmentSerializer

MAX_BULK = 100  # labelings per bulk request: one request stays well under a proxy's timeout


class StepLabelInputSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(**SMALL_INT)
    # Any value a scale may hold: which ones this campaign takes is the rating service's rule (its scale).
    rating = serializers.IntegerField(allow_null=True, min_value=RATING_MIN, max_value=RATING_MAX,
                                      help_text="a value of the campaign's label scale (PRM800K: -1, 0, 1)")
    # Not trimmed here: the service strips it and refuses line breaks with its own message.
    rationale = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, max_length=1_000,
                                      help_text="one-line reason for a −1 (campaigns with step_rationale on)")
    flagged = serializers.BooleanField(required=False, allow_null=True, default=None,
                                       help_text="the Unsure mark (PRM800K's flagged)")
    time_ms = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                       max_value=2**62)
    error_category = serializers.CharField(required=False, allow_null=True, default=None, max_length=100,
                                           help_text="the kind of error of a −1; checked against the campaign's "
                                                     "categories when it defines any")


class LabelingInputSerializer(serializers.Serializer):
    ratings: serializers.ListSerializer[Any] = serializers.ListSerializer(
        child=StepLabelInputSerializer(), max_length=10_000,
        help_text="the steps' ratings, applied in this order (the page's rules)")
    finish_reason = serializers.ChoiceField(choices=FinishReason.choices, required=False, allow_null=True,
                                            default=None, help_text="absent: found_error when a step is −1, "
                                                                    "else solution")
    finish_text = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000,
                                        help_text="the reason for bad_problem / give_up")
    total_time_ms = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                             max_value=2**62)
    client_key = serializers.CharField(max_length=100, help_text="your id of this labeling: a retry with the same "
                                       "key answers the first result and applies nothing again")


def labeling_input(data: dict[str, Any], assignment_id: int) -> LabelingInput:
    """The service's input from a ``LabelingInputSerializer``'s validated data."""
    return LabelingInput(assignment_id=assignment_id, client_key=data["client_key"],
                         ratings=[StepLabel(**label) for label in data["ratings"]],
                         finish_reason=data["finish_reason"], finish_text=data["finish_text"],
                         total_time_ms=data["total_time_ms"])


class BulkLabelingItemSerializer(LabelingInputSerializer):
    assignment = serializers.IntegerField(min_value=1, max_value=2**63 - 1, help_text="one of your assignments")


class BulkLabelingInputSerializer(serializers.Serializer):
    labelings: serializers.ListSerializer[Any] = serializers.ListSerializer(
        child=BulkLabelingItemSerializer(), min_length=1, max_length=MAX_BULK)


class LabelingOutSerializer(AssignmentSerializer):
    """The finished assignment, and whether this answer repeats an earlier request with the same client key."""

    replayed = serializers.BooleanField(read_only=True, help_text="true: the client key was seen before and "
                                        "nothing was applied this time")

    class Meta(AssignmentSerializer.Meta):
        fields = AssignmentSerializer.Meta.fields + ["replayed"]


class LabelingRefusalSerializer(serializers.Serializer):
    field = serializers.CharField(required=False,
                                  help_text="the input at fault: ratings[2], finish_reason, client_key, assignment")
    detail = serializers.CharField()


class BulkLabelingResultSerializer(serializers.Serializer):
    assignment = serializers.IntegerField()
    status = serializers.IntegerField(help_text="the HTTP status this labeling alone would have had")
    labeling = LabelingOutSerializer(allow_null=True, help_text="null when refused")
    error = LabelingRefusalSerializer(allow_null=True, help_text="null when applied")


class BulkLabelingOutSerializer(serializers.Serializer):
    results = BulkLabelingResultSerializer(many=True, help_text="one per labeling, in the order sent")

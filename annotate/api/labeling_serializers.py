"""Input and output of the whole-solution labeling endpoints (one assignment's labeling, several at once)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from annotate.models import ERROR_CATEGORY_MAX_CHARS, FinishReason
from annotate.services.whole_labeling import LabelingInput, LabelingOutcome, StepLabel
from steplab.jsonlimits import MAX_ID

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
    error_category = serializers.CharField(required=False, allow_null=True, default=None,
                                           max_length=ERROR_CATEGORY_MAX_CHARS,
                                           help_text="the kind of error of a −1; checked against the campaign's "
                                                     "categories when it defines any")


#: the keys of a step label the plain check below takes, and their bounds (as ``StepLabelInputSerializer``'s)
_PLAIN_KEYS = frozenset({"step_index", "rating", "flagged", "time_ms"})
_STEP_INDEX_MAX = SMALL_INT["max_value"]
_TIME_MS_MAX = 2**62


def _plain_step_label(item: object) -> dict[str, Any] | None:
    """A step label as ``StepLabelInputSerializer`` validates it, for the body a program sends (JSON integers,
    booleans and nulls only); None for anything else, which the serializer then validates with its messages.
    The serializer's field-by-field run takes several times as long (ten steps: about 1.4 ms against 0.3 ms for
    the whole input on the shared machine)."""
    if type(item) is not dict or not item.keys() <= _PLAIN_KEYS:
        return None
    step_index, rating = item.get("step_index"), item.get("rating")
    flagged, time_ms = item.get("flagged"), item.get("time_ms")
    if (type(step_index) is not int or not 0 <= step_index <= _STEP_INDEX_MAX or "rating" not in item
            or (rating is not None and (type(rating) is not int or not RATING_MIN <= rating <= RATING_MAX))
            or (flagged is not None and type(flagged) is not bool)
            or (time_ms is not None and (type(time_ms) is not int or not 0 <= time_ms <= _TIME_MS_MAX))):
        return None
    return {"step_index": step_index, "rating": rating, "flagged": flagged, "time_ms": time_ms,
            "error_category": None}


class StepLabelsSerializer(serializers.ListSerializer):
    """The steps' labels: each plain one checked at once (``_plain_step_label``), any other by the child."""

    def run_child_validation(self, data: Any) -> Any:
        plain = _plain_step_label(data)
        return plain if plain is not None else super().run_child_validation(data)


class LabelingInputSerializer(serializers.Serializer):
    ratings: serializers.ListSerializer[Any] = StepLabelsSerializer(
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
    assignment = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="one of your assignments")


class BulkLabelingInputSerializer(serializers.Serializer):
    labelings: serializers.ListSerializer[Any] = serializers.ListSerializer(
        child=BulkLabelingItemSerializer(), min_length=1, max_length=MAX_BULK)


_MOMENT = serializers.DateTimeField(read_only=True)  # renders a datetime as the serializers do


def _moment(value: datetime | None) -> str | None:
    return None if value is None else _MOMENT.to_representation(value)


def written_answer(outcome: LabelingOutcome) -> dict[str, Any] | None:
    """``LabelingOutSerializer``'s answer for a pass written at once, from what is in memory: the request reads
    nothing back. None when the pass went another way (the caller reads it). The replay of the same client key
    answers through the serializer, and a test holds the two equal."""
    written = outcome.written
    if written is None:
        return None
    assignment = written.assignment
    ratings = sorted(written.ratings.items())
    return {
        "id": assignment.pk, "solution": assignment.solution_id, "campaign": assignment.solution.campaign_id,
        "labeler": assignment.labeler_id, "status": str(assignment.status),
        "finish_reason": None if assignment.finish_reason is None else str(assignment.finish_reason),
        "finish_reason_text": assignment.finish_reason_text, "started_at": _moment(assignment.started_at),
        "finished_at": _moment(assignment.finished_at), "total_time_ms": assignment.total_time_ms,
        "updated_at": _moment(assignment.updated_at),
        "ratings": [{"step_index": step, "completion_index": completion, "rating": r.rating, "flagged": r.flagged,
                     "rationale": r.rationale} for (step, completion), r in ratings],
        "decisions": [{"step_index": step, "chosen_completion": decision.chosen_completion,
                       "human_text": decision.human_text}
                      for ((step, _), _rating), decision in zip(ratings, written.decisions, strict=True)],
        "lease_expires_at": _moment(assignment.lease_expires_at),
        "steps": [{"index": step.index, "completions": [{"index": c.index, "text": c.text} for c in step.completions]}
                  for step in written.steps],
        "replayed": outcome.replayed,
    }


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

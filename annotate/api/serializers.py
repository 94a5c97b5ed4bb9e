"""The labeling API's output serializers (what it returns) and explicit input serializers (what it accepts)."""
from __future__ import annotations

from typing import Any, TypedDict

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotate.models import ERROR_CATEGORY_MAX_CHARS, Assignment, Campaign, FinishReason, Problem, Solution
from annotate.scales import RATING_MAX, RATING_MIN
from annotate.step_rule_validation import validate_step_rule
from stepcore.steprules import MAX_RULE_CHARS, STEP_RULE_DETAIL
from steplab.jsonlimits import MAX_ID


class RelatedId(serializers.IntegerField):
    """The id of a related row, read from its ``…_id`` column, so the row itself is never fetched."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        super().__init__(source=source, read_only=True, **kwargs)


class CampaignSerializer(serializers.ModelSerializer):
    class Meta:
        model = Campaign
        fields = ["id", "slug", "name", "mode", "overlap", "qc_rate", "lease_minutes", "export_interval_minutes",
                  "suggestions", "lease_order", "step_rationale", "is_active", "created_at", "updated_at"]


class ProblemSerializer(serializers.ModelSerializer):
    campaign = RelatedId("campaign_id")

    class Meta:
        model = Problem
        fields = ["id", "campaign", "source_id", "text", "text_sha256", "answer", "solution", "subject", "level",
                  "created_at"]


class CompletionOutSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    text = serializers.CharField()


class StepOutSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    completions = CompletionOutSerializer(many=True)


def steps_of(solution: Solution) -> list[dict[str, Any]]:
    """Steps with their completions, from prefetched ``steps__completions``."""
    return [{"index": step.index, "completions": [{"index": c.index, "text": c.text} for c in step.completions.all()]}
            for step in solution.steps.all()]


class SolutionSerializer(serializers.ModelSerializer):
    campaign = RelatedId("campaign_id")
    problem = RelatedId("problem_id")
    steps = serializers.SerializerMethodField()

    class Meta:
        model = Solution
        fields = ["id", "campaign", "problem", "generator", "sample_index", "final_answer", "is_correct",
                  "verifier_score", "generation", "is_quality_control", "is_screening", "provenance",
                  "content_sha256", "label_count", "created_at", "steps"]

    @extend_schema_field(StepOutSerializer(many=True))
    def get_steps(self, solution: Solution) -> list[dict[str, Any]]:
        return steps_of(solution)


class RatingOutSerializer(serializers.Serializer):
    step_index = serializers.IntegerField()
    completion_index = serializers.IntegerField()
    rating = serializers.IntegerField(allow_null=True)
    flagged = serializers.BooleanField(allow_null=True, help_text="the labeler's Unsure mark (PRM800K's flagged)")
    rationale = serializers.CharField(required=False, help_text="the labeler's one-line reason for a −1 (empty: none)")


class DecisionOutSerializer(serializers.Serializer):
    step_index = serializers.IntegerField()
    chosen_completion = serializers.IntegerField(allow_null=True)
    human_text = serializers.CharField(allow_null=True)


class LabelSerializer(serializers.ModelSerializer):
    """One finished labeling of one solution (PRM800K's ``label``), with its ratings."""

    solution = RelatedId("solution_id")
    campaign = RelatedId("solution.campaign_id")
    labeler = RelatedId("labeler_id", allow_null=True)
    ratings = serializers.SerializerMethodField()
    decisions = serializers.SerializerMethodField()

    class Meta:
        model = Assignment
        fields = ["id", "solution", "campaign", "labeler", "status", "finish_reason", "finish_reason_text",
                  "started_at", "finished_at", "total_time_ms", "updated_at", "ratings", "decisions"]

    @extend_schema_field(RatingOutSerializer(many=True))
    def get_ratings(self, assignment: Assignment) -> list[dict[str, Any]]:
        return [{"step_index": r.completion.step.index, "completion_index": r.completion.index, "rating": r.rating,
                 "flagged": r.flagged, "rationale": r.rationale} for r in assignment.ratings.all()]

    @extend_schema_field(DecisionOutSerializer(many=True))
    def get_decisions(self, assignment: Assignment) -> list[dict[str, Any]]:
        return [{"step_index": d.step.index, "chosen_completion": d.chosen_completion, "human_text": d.human_text}
                for d in assignment.decisions.all()]


class AssignmentSerializer(LabelSerializer):
    """A labeler's own assignment: the lease, the solution's steps and the ratings so far."""

    steps = serializers.SerializerMethodField()

    class Meta(LabelSerializer.Meta):
        fields = LabelSerializer.Meta.fields + ["lease_expires_at", "steps"]

    @extend_schema_field(StepOutSerializer(many=True))
    def get_steps(self, assignment: Assignment) -> list[dict[str, Any]]:
        return steps_of(assignment.solution)


class RateOutSerializer(AssignmentSerializer):
    """The assignment after a rating, with what a −1 on an earlier step took out of the pass."""

    removed_ratings = RatingOutSerializer(many=True, read_only=True,
                                          help_text="ratings of later steps removed by this −1 (kept as revisions)")
    notice = serializers.CharField(read_only=True, help_text="the same, in words; empty when nothing was removed")

    class Meta(AssignmentSerializer.Meta):
        fields = AssignmentSerializer.Meta.fields + ["removed_ratings", "notice"]


# --- input ----------------------------------------------------------------------------------------

class ListFilterSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID, help_text="campaign id")
    generation = serializers.IntegerField(required=False, min_value=-2**31, max_value=2**31 - 1)
    updated_since = serializers.DateTimeField(required=False, help_text="ISO 8601; rows changed at or after it")


class ImportSolutionsInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="JSONL of solutions (see import_solutions)")
    skip_invalid = serializers.BooleanField(default=False)
    split_rule = serializers.CharField(required=False, allow_blank=True, default="", max_length=MAX_RULE_CHARS,
                                       validators=[validate_step_rule],
                                       help_text=f"empty: the campaign's step rule. {STEP_RULE_DETAIL}")
    generation = serializers.IntegerField(required=False, allow_null=True, min_value=-2**31, max_value=2**31 - 1)


class _Bounds(TypedDict):
    min_value: int
    max_value: int


SMALL_INT: _Bounds = {"min_value": 0, "max_value": 2**31 - 1}


class RateInputSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(**SMALL_INT)
    rating = serializers.IntegerField(allow_null=True, min_value=RATING_MIN, max_value=RATING_MAX,
                                      help_text="a value of the campaign's label scale (PRM800K's: -1, 0, 1)")
    completion_index = serializers.IntegerField(default=0, **SMALL_INT)
    flagged = serializers.BooleanField(required=False, allow_null=True, default=None,
                                       help_text="set or clear the Unsure mark with the rating")
    time_ms = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                       max_value=2**62)
    # Not trimmed here: the service strips it and refuses line breaks with its own message.
    rationale = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, max_length=1_000,
                                      help_text="one-line reason for a −1 (campaigns with step_rationale on); "
                                                "absent keeps the −1's reason, empty clears it")
    error_category = serializers.CharField(required=False, allow_blank=True, max_length=ERROR_CATEGORY_MAX_CHARS,
                                           help_text="one of the campaign's error categories, on an error step; "
                                                     "absent keeps it, empty clears it")


class BadSplitInputSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(**SMALL_INT)
    reported = serializers.BooleanField(default=True, help_text="false withdraws the report")
    note = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False,
                                 max_length=1_000)


class FlagInputSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(**SMALL_INT)
    flagged = serializers.BooleanField(help_text="the Unsure mark (PRM800K's flagged)")
    completion_index = serializers.IntegerField(default=0, **SMALL_INT)


class DecideInputSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(**SMALL_INT)
    chosen_completion = serializers.IntegerField(required=False, allow_null=True, default=None, **SMALL_INT)
    human_text = serializers.CharField(required=False, allow_null=True, default=None, max_length=100_000)


class FinishInputSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=FinishReason.choices)
    text = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)
    total_time_ms = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                             max_value=2**62)


class LeaseOutSerializer(serializers.Serializer):
    assignment = AssignmentSerializer(allow_null=True)
    reason = serializers.CharField()


class ImportReportSerializer(serializers.Serializer):
    file = serializers.CharField()
    lines = serializers.IntegerField()
    imported = serializers.IntegerField()
    rejected_count = serializers.IntegerField()
    rejected = serializers.ListField(child=serializers.DictField())
    created = serializers.DictField(child=serializers.IntegerField())


class CampaignMetricsSerializer(serializers.Serializer):
    """Progress (cached for a few seconds) and the latest quality-metrics snapshot of a campaign."""

    campaign = serializers.IntegerField()
    progress = serializers.DictField(help_text="totals, per generation, finish reasons, labelings in the last 24 h")
    progress_as_of = serializers.DateTimeField()
    quality = serializers.DictField(allow_null=True, help_text="agreement with gold per labeler, inter-annotator "
                                    "agreement (each figure with its item count), times; null before the first run")
    quality_computed_at = serializers.DateTimeField(allow_null=True)

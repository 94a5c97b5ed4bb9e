from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from . import models


@admin.register(models.Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "mode", "overlap", "qc_rate", "is_active")
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("campaign", "user", "role", "is_active", "passed_screening", "is_paused")
    list_filter = ("role", "is_active")
    raw_id_fields = ("user",)


@admin.register(models.Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "source_id", "subject", "level", "answer")
    list_filter = ("campaign",)
    search_fields = ("source_id", "text")
    list_select_related = ("campaign",)


@admin.register(models.Solution)
class SolutionAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "problem", "generator", "generation", "is_correct", "label_count",
                    "is_quality_control", "is_screening")
    list_filter = ("campaign", "is_correct", "is_quality_control", "is_screening")
    raw_id_fields = ("problem",)
    list_select_related = ("campaign", "problem")
    readonly_fields = ("resplit",)

    @admin.display(description="Step boundaries")
    def resplit(self, solution: models.Solution) -> str:
        """Steps are re-split on the management page, whose service keeps labels (a new solution if rated)."""
        if solution.pk is None:
            return "—"
        url = reverse("manage:resplit", args=[solution.campaign.slug, solution.pk])
        return format_html('<a href="{}">Re-split this solution\'s steps</a>', url)


@admin.register(models.Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ("id", "solution", "index")
    raw_id_fields = ("solution",)


@admin.register(models.Completion)
class CompletionAdmin(admin.ModelAdmin):
    list_display = ("id", "step", "index", "text")
    raw_id_fields = ("step",)


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("id", "solution", "labeler", "status", "finish_reason", "total_time_ms", "finished_at")
    list_filter = ("status", "finish_reason")
    raw_id_fields = ("solution", "labeler")
    list_select_related = ("labeler",)


@admin.register(models.Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ("id", "assignment", "completion", "rating", "flagged", "rationale", "updated_at")
    raw_id_fields = ("assignment", "completion")


@admin.register(models.RatingRevision)
class RatingRevisionAdmin(admin.ModelAdmin):
    list_display = ("id", "rating", "previous_rating", "previous_flagged", "changed_at")
    raw_id_fields = ("rating", "changed_by")


@admin.register(models.SplitReport)
class SplitReportAdmin(admin.ModelAdmin):
    list_display = ("id", "assignment", "step", "note", "created_at")
    raw_id_fields = ("assignment", "step")


@admin.register(models.StepDecision)
class StepDecisionAdmin(admin.ModelAdmin):
    list_display = ("id", "assignment", "step", "chosen_completion")
    raw_id_fields = ("assignment", "step")


@admin.register(models.ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "kind", "original_name", "status", "imported", "rejected_count", "created_at")
    list_filter = ("kind", "status")
    readonly_fields = ("rejected", "created")


@admin.register(models.ResolvedLabel)
class ResolvedLabelAdmin(admin.ModelAdmin):
    list_display = ("id", "solution", "step", "rating", "reviewer", "updated_at")
    raw_id_fields = ("solution", "step", "reviewer")


@admin.register(models.CampaignMetrics)
class CampaignMetricsAdmin(admin.ModelAdmin):
    list_display = ("campaign", "computed_at", "duration_ms")

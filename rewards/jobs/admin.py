from django.contrib import admin

from .models import (
    CandidatePool,
    ComparisonRun,
    EvaluationRun,
    LabelingRound,
    RewardModel,
    SamplingJob,
    ScoringJob,
    TrainingJob,
)


@admin.register(TrainingJob)
class TrainingJobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "campaign", "dataset_version", "backend", "status", "progress", "created_at")
    list_filter = ("status", "kind", "backend")
    raw_id_fields = ("dataset_version", "campaign", "started_by")


@admin.register(RewardModel)
class RewardModelAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "kind", "campaign", "trained_on", "created_at")
    raw_id_fields = ("job", "campaign", "dataset_version")


@admin.register(ScoringJob)
class ScoringJobAdmin(admin.ModelAdmin):
    list_display = ("id", "reward_model", "pool", "status", "progress", "created_at")
    raw_id_fields = ("reward_model", "pool", "started_by")


admin.site.register(CandidatePool)
admin.site.register(EvaluationRun)


@admin.register(LabelingRound)
class LabelingRoundAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "number", "strategy", "status", "batch_size", "selected_count", "created_at")
    list_filter = ("status", "strategy")
    raw_id_fields = ("campaign", "pool", "reward_model", "dataset_version", "scoring_job", "created_by")


@admin.register(SamplingJob)
class SamplingJobAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "backend", "status", "progress", "problem_count", "pool", "created_at")
    list_filter = ("status", "backend")
    raw_id_fields = ("campaign", "pool", "started_by")


@admin.register(ComparisonRun)
class ComparisonRunAdmin(admin.ModelAdmin):
    list_display = ("id", "campaign", "status", "stage", "max_steps", "per_problem", "created_at", "finished_at")
    list_filter = ("status", "stage")
    raw_id_fields = ("campaign", "source_pool", "pool", "dataset_version", "prm_job", "orm_job", "prm_scoring",
                     "orm_scoring", "evaluation", "started_by")

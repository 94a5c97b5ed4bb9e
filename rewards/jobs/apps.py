from django.apps import AppConfig


class JobsConfig(AppConfig):
    """Training/scoring jobs, registered reward models, evaluation runs, dashboard, active learning."""

    name = "rewards.jobs"
    label = "jobs"
    verbose_name = "Reward-model jobs"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    """Served-model endpoints: OpenAI-compatible servers a job may call (LLM judges, sampling from a policy)."""

    name = "endpoints"
    verbose_name = "Model endpoints"
    default_auto_field = "django.db.models.BigAutoField"

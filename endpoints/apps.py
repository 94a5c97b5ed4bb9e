from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    """Served-model endpoints: OpenAI-compatible servers a job may call (LLM judges, sampling from a policy)."""

    name = "endpoints"
    verbose_name = "Model endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotate.permissions import can_manage_endpoints
        from steplab import nav

        nav.register("staff_endpoints", lambda user: can_manage_endpoints(user, None))  # staff only

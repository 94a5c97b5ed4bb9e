from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The API's own home: personal API tokens (model, services, DRF authentication and scope) and their pages.
    Every app's endpoints under /api/ authenticate with them, so they belong to none of those apps."""

    name = "api"
    label = "api"
    verbose_name = "API tokens"
    default_auto_field = "django.db.models.BigAutoField"

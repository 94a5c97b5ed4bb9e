from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Campaign webhooks: signed POSTs to receivers an admin registers, for events programs wait on."""

    name = "webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Campaign webhooks: signed POSTs to receivers an admin registers, for events programs wait on."""

    name = "webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from steplab import events

        from .services import on_domain_event

        events.subscribe(on_domain_event)

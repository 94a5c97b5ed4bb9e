from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Labeling"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from steplab import converters, nav

        from .permissions import can_manage_any, can_research_any

        converters.register()
        nav.register("manage", can_manage_any)  # staff, campaign admins
        nav.register("research", can_research_any)  # staff, admins, researchers
        user_logged_in.connect(nav.remember_places, dispatch_uid="steplab-nav-places")

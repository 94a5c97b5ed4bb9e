from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Labeling"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from steplab import converters
        from steplab.nav import remember_places

        converters.register()
        user_logged_in.connect(remember_places, dispatch_uid="steplab-nav-places")

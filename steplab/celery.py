"""The Celery app: Redis broker in the real stack, a filesystem broker on the embedded default."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")

app = Celery("steplab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

"""Steplab: the open platform for process-supervision data."""
from .celery import app as celery_app

__all__ = ("celery_app",)

"""The datasets API's routes; ``steplab.api_urls`` registers them on the one /api/ router (``api`` namespace)."""
from __future__ import annotations

from . import views

ROUTES = [
    ("datasets", views.DatasetVersionViewSet, "dataset"),
]

"""The labeling API's routes; ``steplab.api_urls`` registers them on the one /api/ router (``api`` namespace)."""
from __future__ import annotations

from rest_framework.viewsets import ViewSetMixin

from . import labeling_views, views

ROUTES: list[tuple[str, type[ViewSetMixin], str]] = [
    ("campaigns", views.CampaignViewSet, "campaign"),
    ("problems", views.ProblemViewSet, "problem"),
    ("solutions", views.SolutionViewSet, "solution"),
    ("labels", views.LabelViewSet, "label"),
    ("assignments", views.AssignmentViewSet, "assignment"),
    ("labelings", labeling_views.LabelingViewSet, "labeling"),
]

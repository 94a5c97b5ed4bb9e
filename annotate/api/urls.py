"""The labeling API's routes; ``steplab.api_urls`` registers them on the one /api/ router (``api`` namespace)."""
from __future__ import annotations

from . import labeling_views, views

ROUTES = [
    ("campaigns", views.CampaignViewSet, "campaign"),
    ("problems", views.ProblemViewSet, "problem"),
    ("solutions", views.SolutionViewSet, "solution"),
    ("labels", views.LabelViewSet, "label"),
    ("assignments", views.AssignmentViewSet, "assignment"),
    ("labelings", labeling_views.LabelingViewSet, "labeling"),
]

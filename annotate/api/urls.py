"""The labeling API's routes; ``steplab.api_urls`` registers them on the one /api/ router (``api`` namespace)."""
from __future__ import annotations

from . import views

ROUTES = [
    ("campaigns", views.CampaignViewSet, "campaign"),
    ("problems", views.ProblemViewSet, "problem"),
    ("solutions", views.SolutionViewSet, "solution"),
    ("labels", views.LabelViewSet, "label"),
    ("assignments", views.AssignmentViewSet, "assignment"),
]

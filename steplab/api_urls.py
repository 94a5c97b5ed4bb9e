"""The REST API under /api/ (namespace ``api``): each app's routes on one router, so one root view lists them
all and one OpenAPI schema documents them. Pages live elsewhere (``pages``, ``annotate``, ``jobs``)."""
from __future__ import annotations

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from annotate.api.urls import ROUTES as LABELING_ROUTES
from rewards.api.urls import ROUTES as DATASET_ROUTES
from rewards.jobs import api as jobs_api

app_name = "api"

router = DefaultRouter()
for prefix, viewset, basename in (*LABELING_ROUTES, *DATASET_ROUTES):
    router.register(prefix, viewset, basename=basename)

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    *jobs_api.urls(),
    path("", include(router.urls)),
]

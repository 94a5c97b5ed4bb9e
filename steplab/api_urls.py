"""The REST API under /api/ (namespace ``api``): each app's routes on one router, so one root view lists them
all and one OpenAPI schema documents them. Pages live elsewhere (``pages``, ``annotate``, ``jobs``)."""
from __future__ import annotations

from typing import Any

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import routers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.viewsets import ViewSetMixin

from annotate.api.urls import ROUTES as LABELING_ROUTES
from endpoints.api import ROUTES as ENDPOINT_ROUTES
from rewards.api.urls import ROUTES as DATASET_ROUTES
from rewards.jobs import api as jobs_api

app_name = "api"


class ApiRootView(routers.APIRootView):
    """Every API under /api/: the router's resources, the jobs API, the schema and its docs. A route whose path
    holds an id is listed as a URI template (``{campaign}``, ``{pk}``), as the schema writes it."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        root = request.build_absolute_uri(request.path)
        for prefix, _, _ in router.registry:  # a resource with no list (your assignments): its detail route
            response.data.setdefault(prefix, f"{root}{prefix}/{{pk}}/")
        for route, _, name in jobs_api.routes():
            response.data[name.replace("_", "-")] = root + route.replace("<id:pk>", "{pk}")
        response.data["schema"] = reverse("api:schema", request=request)
        response.data["docs"] = reverse("api:docs", request=request)
        return response


class Router(routers.DefaultRouter):
    APIRootView = ApiRootView


router = Router()
ROUTES: list[tuple[str, type[ViewSetMixin], str]] = [*LABELING_ROUTES, *DATASET_ROUTES, *ENDPOINT_ROUTES]
for prefix, viewset, basename in ROUTES:
    router.register(prefix, viewset, basename=basename)

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # the split view serves Swagger UI's start-up script as a file (?script=): no inline script, so the site's CSP
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    *jobs_api.urls(),
    path("", include(router.urls)),
]

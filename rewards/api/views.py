"""The datasets REST API: ready dataset versions and their files (Range downloads, ``X-Content-SHA256``).

Versions of campaigns the user is not a member of are 404s; a labeler asking for a campaign's datasets gets
a 403 that says why.
"""
from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotate.permissions import CanReadDatasets, member_campaigns, research_campaigns
from rewards.models import DatasetVersion
from rewards.services.downloads import RangeNotSatisfiable, open_download

from . import serializers as s


@extend_schema(parameters=[OpenApiParameter("campaign", int, description="campaign id")])
class DatasetVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Dataset versions of the campaigns you can read; files download with Range support."""

    serializer_class = s.DatasetVersionSerializer
    # Checked on the version (retrieve and download); an own list replaces, not extends, the defaults.
    permission_classes = [*cast(list[type[BasePermission]], api_settings.DEFAULT_PERMISSION_CLASSES), CanReadDatasets]

    def get_queryset(self) -> QuerySet[DatasetVersion]:
        queryset = DatasetVersion.objects.select_related("campaign").filter(
            campaign__in=member_campaigns(self.request.user), status=DatasetVersion.Status.READY)
        query = s.CampaignFilterSerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)  # 400 naming the field: not an integer ('²'), or past bigint
        if "campaign" in query.validated_data:
            queryset = queryset.filter(campaign_id=query.validated_data["campaign"])
        return queryset.order_by("pk")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        readable = research_campaigns(request.user)
        queryset = self.filter_queryset(self.get_queryset()).filter(campaign__in=readable)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        version = self.get_object()
        return Response(self.get_serializer(version).data)

    @extend_schema(
        parameters=[OpenApiParameter("Range", str, OpenApiParameter.HEADER, required=False,
                                     description="bytes=START-END (one range)")],
        responses={(200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
                   (206, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
                   416: OpenApiResponse(description="range not satisfiable")},
    )
    @action(detail=True, methods=["get"], url_path=r"files/(?P<fmt>[A-Za-z0-9_-]+)")
    def download(self, request: Request, pk: str | None = None, fmt: str = "") -> HttpResponseBase:
        """Stream one file; ``X-Content-SHA256`` carries the file's SHA-256 (hex)."""
        version = self.get_object()
        if fmt not in version.files:
            raise Http404(f"version {version.number} has no {fmt!r} file (has: {', '.join(sorted(version.files))})")
        try:
            download = open_download(version, fmt, request.headers.get("Range"))
        except RangeNotSatisfiable as error:
            refused = HttpResponse(str(error), status=416, content_type="text/plain")
            refused["Content-Range"] = f"bytes */{error.size}"
            return refused
        streamed = StreamingHttpResponse(download.chunks, status=download.status, content_type=download.content_type)
        for header, value in download.headers.items():
            streamed[header] = value
        return streamed

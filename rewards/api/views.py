"""REST API views: thin wrappers over ``annotate.services`` and ``rewards.services``.

Ids are the database primary keys (stable). Lists are ordered by id and paginated with
``?limit=&offset=``. Objects of campaigns the user may not read are 404s; a labeler asking for a
campaign's datasets gets a 403 that says why.
"""
from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMetrics,
    Completion,
    Problem,
    Rating,
    Role,
    Solution,
    Step,
    StepDecision,
)
from annotate.services import labeling
from annotate.services.campaigns import cached_campaign_progress
from annotate.services.importing import ImportFailed, ImportReport
from annotate.services.problems import import_solutions
from rewards.models import DatasetVersion
from rewards.services.access import can_import, member_campaigns, readable_campaigns, role_in
from rewards.services.downloads import RangeNotSatisfiable, open_download

from . import serializers as s

FILTERS = [s.ListFilterSerializer]


def _filters(request: Request) -> dict[str, Any]:
    serializer = s.ListFilterSerializer(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class CampaignViewSet(viewsets.ReadOnlyModelViewSet):
    """Campaigns you are a member of (any role)."""

    serializer_class = s.CampaignSerializer

    def get_queryset(self) -> QuerySet[Campaign]:
        return member_campaigns(self.request.user).order_by("pk")

    @extend_schema(request={"multipart/form-data": s.ImportSolutionsInputSerializer},
                   responses={201: s.ImportReportSerializer, 400: s.ImportReportSerializer})
    @action(detail=True, methods=["post"], url_path="import-solutions")
    def import_solutions(self, request: Request, pk: str | None = None) -> Response:
        """Import a JSONL file of solutions (same importer as ``manage.py import_solutions``); admins only."""
        campaign = self.get_object()
        if not can_import(request.user, campaign):
            raise PermissionDenied("Only the campaign's admins can import solutions.")
        data = s.ImportSolutionsInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
            handle.flush()
            try:
                report = import_solutions(Path(handle.name), campaign,
                                          skip_invalid=data.validated_data["skip_invalid"],
                                          split_rule=data.validated_data["split_rule"],
                                          generation=data.validated_data.get("generation"))
            except ImportFailed as failed:
                return Response(_report_body(failed.report, upload.name), status=status.HTTP_400_BAD_REQUEST)
        return Response(_report_body(report, upload.name), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: s.CampaignMetricsSerializer})
    @action(detail=True, methods=["get"])
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        """Progress and quality figures of the admin dashboard (admins, researchers and staff)."""
        campaign = self.get_object()
        if role_in(request.user, campaign) not in (Role.ADMIN, Role.RESEARCHER):
            raise PermissionDenied("Campaign metrics are for the campaign's admins and researchers.")
        progress, as_of = cached_campaign_progress(campaign)
        snapshot = CampaignMetrics.objects.filter(campaign=campaign).first()
        figures = asdict(progress)
        figures["labelings_per_hour"] = [[hour.isoformat(), count] for hour, count in progress.labelings_per_hour]
        return Response({"campaign": campaign.pk, "progress": figures, "progress_as_of": as_of,
                         "quality": snapshot.data if snapshot else None,
                         "quality_computed_at": snapshot.computed_at if snapshot else None})

    @extend_schema(request=None, responses={200: s.LeaseOutSerializer})
    @action(detail=True, methods=["post"])
    def lease(self, request: Request, pk: str | None = None) -> Response:
        """Your open assignment in this campaign, else the next solution to label (the labeling page's rule)."""
        campaign = self.get_object()
        try:
            outcome = labeling.lease_next_solution(campaign, request.user)
        except labeling.NotAllowed as error:
            raise PermissionDenied(str(error)) from None
        assignment = _assignment_queryset().filter(pk=outcome.assignment.pk).first() if outcome.assignment else None
        return Response({"assignment": s.AssignmentSerializer(assignment).data if assignment else None,
                         "reason": outcome.reason})


def _report_body(report: ImportReport, name: str) -> dict[str, Any]:
    """The report as the uploader knows the file: by its own name, never the server's temporary path."""
    body = report.as_dict()
    body["file"] = name
    for item in body["rejected"]:
        item["file"] = name
    return body


def _solution_queryset() -> QuerySet[Solution]:
    completions = Prefetch("steps__completions", queryset=Completion.objects.order_by("index"))
    return Solution.objects.prefetch_related(Prefetch("steps", queryset=Step.objects.order_by("index")), completions)


def _assignment_queryset() -> QuerySet[Assignment]:
    return Assignment.objects.select_related("solution").prefetch_related(
        Prefetch("ratings", queryset=Rating.objects.select_related("completion__step").order_by(
            "completion__step__index", "completion__index")),
        Prefetch("decisions", queryset=StepDecision.objects.select_related("step").order_by("step__index")),
        Prefetch("solution__steps", queryset=Step.objects.order_by("index")),
        Prefetch("solution__steps__completions", queryset=Completion.objects.order_by("index")),
    )


@extend_schema(parameters=FILTERS)
class ProblemViewSet(viewsets.ReadOnlyModelViewSet):
    """The problems of campaigns you can read (problems are owned by one campaign; the staff bank is not here)."""

    serializer_class = s.ProblemSerializer

    def get_queryset(self) -> QuerySet[Problem]:
        filters = _filters(self.request)
        problems = Problem.objects.filter(campaign__in=readable_campaigns(self.request.user))
        if "campaign" in filters:
            problems = problems.filter(campaign_id=filters["campaign"])
        if "generation" in filters:
            problems = problems.filter(pk__in=Solution.objects.filter(generation=filters["generation"])
                                       .values("problem_id"))
        if "updated_since" in filters:
            problems = problems.filter(created_at__gte=filters["updated_since"])
        return problems.order_by("pk")


@extend_schema(parameters=FILTERS)
class SolutionViewSet(viewsets.ReadOnlyModelViewSet):
    """Solutions with their steps and completions; ``updated_since`` compares the creation time."""

    serializer_class = s.SolutionSerializer

    def get_queryset(self) -> QuerySet[Solution]:
        filters = _filters(self.request)
        queryset = _solution_queryset().filter(campaign__in=readable_campaigns(self.request.user))
        if "campaign" in filters:
            queryset = queryset.filter(campaign_id=filters["campaign"])
        if "generation" in filters:
            queryset = queryset.filter(generation=filters["generation"])
        if "updated_since" in filters:
            queryset = queryset.filter(created_at__gte=filters["updated_since"])
        return queryset.order_by("pk")


@extend_schema(parameters=FILTERS)
class LabelViewSet(viewsets.ReadOnlyModelViewSet):
    """Finished labelings (not gold answers) with their ratings and decisions."""

    serializer_class = s.LabelSerializer

    def get_queryset(self) -> QuerySet[Assignment]:
        filters = _filters(self.request)
        queryset = _assignment_queryset().filter(
            solution__campaign__in=readable_campaigns(self.request.user), status=AssignmentStatus.SUBMITTED,
            is_gold=False)
        if "campaign" in filters:
            queryset = queryset.filter(solution__campaign_id=filters["campaign"])
        if "generation" in filters:
            queryset = queryset.filter(solution__generation=filters["generation"])
        if "updated_since" in filters:
            queryset = queryset.filter(updated_at__gte=filters["updated_since"])
        return queryset.order_by("pk")


class AssignmentViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Your own assignments: read one, rate, mark Unsure (``flag``), decide (conversational), finish."""

    serializer_class = s.AssignmentSerializer

    def get_queryset(self) -> QuerySet[Assignment]:
        return _assignment_queryset().filter(labeler_id=self.request.user.pk).order_by("pk")

    def _act(self, pk: str | None, call: Any, extra: Any = None) -> Response:
        try:
            assignment_id = int(pk or "")
        except ValueError:
            raise NotFound("No such assignment.") from None
        if not Assignment.objects.filter(pk=assignment_id, labeler_id=self.request.user.pk).exists():
            raise NotFound("No such assignment of yours.")
        try:
            result = call(assignment_id)
        except labeling.NotAllowed as error:
            raise PermissionDenied(str(error)) from None
        except labeling.LeaseExpired as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except labeling.LabelingError as error:
            raise ValidationError({"detail": str(error)}) from None
        body = s.AssignmentSerializer(self.get_queryset().get(pk=assignment_id)).data
        return Response({**body, **extra(result)} if extra else body)

    @extend_schema(request=s.RateInputSerializer, responses={200: s.RateOutSerializer})
    @action(detail=True, methods=["post"])
    def rate(self, request: Request, pk: str | None = None) -> Response:
        """Stepwise: a −1 does not finish the pass (``finish`` with ``found_error`` does); a −1 on an earlier
        step takes the later steps' ratings out of the pass and lists them in ``removed_ratings``."""
        data = s.RateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._act(pk, lambda a: labeling.record_rating(a, request.user, **data.validated_data),
                         lambda result: {
                             "removed_ratings": [{"step_index": r.step_index, "completion_index": r.completion_index,
                                                  "rating": r.rating, "flagged": r.flagged} for r in result.removed],
                             "notice": result.removed_notice})

    @extend_schema(request=s.FlagInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def flag(self, request: Request, pk: str | None = None) -> Response:
        data = s.FlagInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._act(pk, lambda a: labeling.flag_step(a, request.user, **data.validated_data))

    @extend_schema(request=s.DecideInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str | None = None) -> Response:
        data = s.DecideInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._act(pk, lambda a: labeling.decide_step(a, request.user, **data.validated_data))

    @extend_schema(request=s.FinishInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str | None = None) -> Response:
        data = s.FinishInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._act(pk, lambda a: labeling.finish_assignment(a, request.user, **data.validated_data))


@extend_schema(parameters=[OpenApiParameter("campaign", int, description="campaign id")])
class DatasetVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Dataset versions of the campaigns you can read; files download with Range support."""

    serializer_class = s.DatasetVersionSerializer

    def get_queryset(self) -> QuerySet[DatasetVersion]:
        queryset = DatasetVersion.objects.select_related("campaign").filter(
            campaign__in=member_campaigns(self.request.user), status=DatasetVersion.Status.READY)
        query = s.CampaignFilterSerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)  # 400 naming the field: not an integer ('²'), or past bigint
        if "campaign" in query.validated_data:
            queryset = queryset.filter(campaign_id=query.validated_data["campaign"])
        return queryset.order_by("pk")

    def _check_reader(self, version: DatasetVersion) -> None:
        if role_in(self.request.user, version.campaign) not in ("researcher", "admin"):
            raise PermissionDenied("Labelers cannot read or download datasets; ask a campaign admin.")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        readable = readable_campaigns(request.user)
        queryset = self.filter_queryset(self.get_queryset()).filter(campaign__in=readable)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        version = self.get_object()
        self._check_reader(version)
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
        self._check_reader(version)
        if fmt not in version.files:
            raise Http404(f"version {version.number} has no {fmt!r} file (has: {', '.join(sorted(version.files))})")
        try:
            download = open_download(version, fmt, request.headers.get("Range"))
        except RangeNotSatisfiable as error:
            response = HttpResponse(str(error), status=416, content_type="text/plain")
            response["Content-Range"] = f"bytes */{error.size}"
            return response
        streamed = StreamingHttpResponse(download.chunks, status=download.status, content_type=download.content_type)
        for header, value in download.headers.items():
            streamed[header] = value
        return streamed

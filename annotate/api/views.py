"""The labeling REST API: thin wrappers over ``annotate.services``; who may do what is ``annotate.permissions``.

Ids are the database primary keys (stable). Lists are ordered by id and paginated with ``?limit=&offset=``.
Objects of campaigns the user may not read are 404s; an action the user's role does not allow is a 403 that
says why.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from django.db.models import Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from annotate import permissions, selectors
from annotate.models import Assignment, AssignmentStatus, Campaign, CampaignMetrics, Problem, Solution
from annotate.permissions import CanImportSolutions, CanReadMetrics, member_campaigns, research_campaigns
from annotate.services import campaigns, labeling, leases
from annotate.services.campaigns import cached_campaign_progress
from annotate.services.errors import LabelingError, LeaseExpired, NotAllowed
from annotate.services.importing import ImportFailed, ImportReport
from stepcore.graders import GraderConfigError
from stepcore.steps import StepRuleError

from . import labeling_serializers as ls
from . import serializers as s
from .labeling_views import label_one

FILTERS = [s.ListFilterSerializer]
DEFAULT_PERMISSIONS = api_settings.DEFAULT_PERMISSION_CLASSES  # an action's own classes replace, not extend, these


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
    @action(detail=True, methods=["post"], url_path="import-solutions",
            permission_classes=[*DEFAULT_PERMISSIONS, CanImportSolutions])
    def import_solutions(self, request: Request, pk: str | None = None) -> Response:
        """Import a JSONL file of solutions (same importer as ``manage.py import_solutions``); admins only."""
        campaign = self.get_object()
        data = s.ImportSolutionsInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
            handle.flush()
            try:
                report = campaigns.import_solutions_now(campaign, path=Path(handle.name), user=request.user,
                                                        skip_invalid=data.validated_data["skip_invalid"],
                                                        split_rule=data.validated_data["split_rule"],
                                                        generation=data.validated_data.get("generation"))
            except permissions.NotAllowed as refused:
                raise PermissionDenied(str(refused)) from None
            except ImportFailed as failed:
                return Response(_report_body(failed.report, upload.name), status=status.HTTP_400_BAD_REQUEST)
            except StepRuleError as error:  # the campaign's stored rule, which the engine refuses
                raise ValidationError({"split_rule": [f"the campaign's {error}; choose a rule for this import"]}) \
                    from None
            except GraderConfigError as error:  # the campaign's stored grader setting, which the engine refuses
                raise ValidationError({"grader": [f"the campaign's grader setting {error}"]}) from None
        return Response(_report_body(report, upload.name), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: s.CampaignMetricsSerializer})
    @action(detail=True, methods=["get"], permission_classes=[*DEFAULT_PERMISSIONS, CanReadMetrics])
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        """Progress and quality figures of the admin dashboard (admins, researchers and staff)."""
        campaign = self.get_object()
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
            outcome = leases.lease_next_solution(campaign, request.user)
        except NotAllowed as error:
            raise PermissionDenied(str(error)) from None
        assignment = (selectors.assignments_with_ratings().filter(pk=outcome.assignment.pk).first()
                      if outcome.assignment else None)
        return Response({"assignment": s.AssignmentSerializer(assignment).data if assignment else None,
                         "reason": outcome.reason})


def _report_body(report: ImportReport, name: str) -> dict[str, Any]:
    """The report as the uploader knows the file: by its own name, never the server's temporary path."""
    body = report.as_dict()
    body["file"] = name
    for item in body["rejected"]:
        item["file"] = name
    return body


class FilteredViewSet(viewsets.ReadOnlyModelViewSet):
    """A research list narrowed by the shared query filters (``campaign``, ``generation``, ``updated_since``):
    ``lookups`` says what each filter means for this model, a field lookup or a condition on the value."""

    lookups: ClassVar[dict[str, str | Callable[[Any], Q]]]

    def readable(self) -> QuerySet[Any]:
        """Everything the user may read here, before the filters."""
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        filters = _filters(self.request)
        queryset = self.readable()
        for name, lookup in self.lookups.items():
            if name in filters:
                condition = Q(**{lookup: filters[name]}) if isinstance(lookup, str) else lookup(filters[name])
                queryset = queryset.filter(condition)
        return queryset.order_by("pk")


@extend_schema(parameters=FILTERS)
class ProblemViewSet(FilteredViewSet):
    """The problems of campaigns you can read (problems are owned by one campaign; the staff bank is not here)."""

    serializer_class = s.ProblemSerializer
    lookups = {
        "campaign": "campaign_id",
        "generation": lambda generation: Q(pk__in=Solution.objects.filter(generation=generation)
                                           .values("problem_id")),
        "updated_since": "created_at__gte",
    }

    def readable(self) -> QuerySet[Problem]:
        return Problem.objects.filter(campaign__in=research_campaigns(self.request.user))


@extend_schema(parameters=FILTERS)
class SolutionViewSet(FilteredViewSet):
    """Solutions with their steps and completions; ``updated_since`` compares the creation time."""

    serializer_class = s.SolutionSerializer
    lookups = {"campaign": "campaign_id", "generation": "generation", "updated_since": "created_at__gte"}

    def readable(self) -> QuerySet[Solution]:
        return selectors.solutions_with_steps().filter(campaign__in=research_campaigns(self.request.user))


@extend_schema(parameters=FILTERS)
class LabelViewSet(FilteredViewSet):
    """Finished labelings (not gold answers) with their ratings and decisions."""

    serializer_class = s.LabelSerializer
    lookups = {"campaign": "solution__campaign_id", "generation": "solution__generation",
               "updated_since": "updated_at__gte"}

    def readable(self) -> QuerySet[Assignment]:
        return selectors.assignments_with_ratings().filter(
            solution__campaign__in=research_campaigns(self.request.user), status=AssignmentStatus.SUBMITTED,
            is_gold=False)


class AssignmentViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Your own assignments: read one, rate, mark Unsure (``flag``), decide (conversational), finish."""

    serializer_class = s.AssignmentSerializer

    def get_queryset(self) -> QuerySet[Assignment]:
        return selectors.assignments_with_ratings().filter(labeler_id=self.request.user.pk).order_by("pk")

    def _act(self, pk: str | None, given: type[serializers.Serializer], service: Any, extra: Any = None) -> Response:
        """Validate the body with ``given``, call ``service(assignment_id, user=user, **body)`` on one of your own
        assignments and answer with the assignment (plus ``extra(result)``); refusals map to HTTP codes."""
        data = given(data=self.request.data)
        data.is_valid(raise_exception=True)
        try:
            assignment_id = int(pk or "")
        except ValueError:
            raise NotFound("No such assignment.") from None
        if not Assignment.objects.filter(pk=assignment_id, labeler_id=self.request.user.pk).exists():
            raise NotFound("No such assignment of yours.")
        try:
            result = service(assignment_id, user=self.request.user, **data.validated_data)
        except NotAllowed as error:
            raise PermissionDenied(str(error)) from None
        except LeaseExpired as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except LabelingError as error:
            raise ValidationError({error.field or "detail": [str(error)] if error.field else str(error)}) from None
        body = s.AssignmentSerializer(self.get_queryset().get(pk=assignment_id)).data
        return Response({**body, **extra(result)} if extra else body)

    @extend_schema(request=s.RateInputSerializer, responses={200: s.RateOutSerializer})
    @action(detail=True, methods=["post"])
    def rate(self, request: Request, pk: str | None = None) -> Response:
        """Stepwise: a −1 does not finish the pass (``finish`` with ``found_error`` does); a −1 on an earlier
        step takes the later steps' ratings out of the pass and lists them in ``removed_ratings``."""
        return self._act(pk, s.RateInputSerializer, labeling.record_rating,
                         lambda result: {
                             "removed_ratings": [{"step_index": r.step_index, "completion_index": r.completion_index,
                                                  "rating": r.rating, "flagged": r.flagged} for r in result.removed],
                             "notice": result.removed_notice})

    @extend_schema(request=s.FlagInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def flag(self, request: Request, pk: str | None = None) -> Response:
        return self._act(pk, s.FlagInputSerializer, labeling.flag_step)

    @extend_schema(request=s.BadSplitInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"], url_path="bad-split")
    def bad_split(self, request: Request, pk: str | None = None) -> Response:
        """Report a step of your open pass as badly split (its boundaries look wrong), or withdraw the report."""
        return self._act(pk, s.BadSplitInputSerializer, labeling.report_bad_split)

    @extend_schema(request=s.DecideInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str | None = None) -> Response:
        return self._act(pk, s.DecideInputSerializer, labeling.decide_step)

    @extend_schema(request=s.FinishInputSerializer, responses={200: s.AssignmentSerializer})
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str | None = None) -> Response:
        return self._act(pk, s.FinishInputSerializer, labeling.finish_assignment)

    @extend_schema(request=ls.LabelingInputSerializer,
                   responses={200: ls.LabelingOutSerializer,
                              400: OpenApiResponse(OpenApiTypes.OBJECT, description="a refusal, {field, detail}; "
                                                   "malformed input, {field: [messages]}"),
                              403: ls.LabelingRefusalSerializer, 404: ls.LabelingRefusalSerializer,
                              409: ls.LabelingRefusalSerializer})
    @action(detail=True, methods=["post"])
    def labeling(self, request: Request, pk: str | None = None) -> Response:
        """The whole solution in one request: rate the steps in the order given and finish the pass, under the
        page's rules, all or nothing. A retry with the same ``client_key`` answers the first result
        (``replayed``: true) and applies nothing again."""
        try:
            assignment_id = int(pk or "")
        except ValueError:
            raise NotFound("No such assignment.") from None
        return label_one(request, assignment_id)

"""What every view of the jobs API shares: campaigns by id (by slug at the /models/api/ aliases), the settings'
pagination, the schema's rules, one job's GET and cancel views, a campaign's launched jobs of one kind."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, cast

from django.db.models import QuerySet
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from annotate.models import Campaign
from annotate.permissions import NotAllowed, Predicate, can_research, can_research_any, can_start_labeling_round

from .. import models
from ..services.training import JobInputError
from ..text import shown


@extend_schema_field(OpenApiTypes.INT)
class CampaignRef(serializers.Field):
    """The campaign's id; its slug at the /models/api/ aliases (``legacy`` in the serializer's context)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, campaign: Campaign) -> int | str:
        return campaign.slug if self.context.get("legacy") else campaign.pk


# A row of one campaign's, which names it as a CampaignRef. No docstring: the schema would give it to every
# serializer below as its description.
class CampaignRowOut(serializers.ModelSerializer):
    campaign = CampaignRef()


class JobsSchema(AutoSchema):
    """Only GET lists are paginated: a POST that starts several jobs answers them as a plain list. A one-job view
    answers its ``output`` serializer."""

    def _get_paginator(self) -> Any:
        return super()._get_paginator() if self.method == "GET" else None

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "output", None)
        return {200: output} if output is not None else super().get_response_serializers()


def settings_field(about: str, keys: Iterable[str]) -> serializers.DictField:
    """A job's settings as given (its service checks them): ``about`` them, and the keys it takes."""
    return serializers.DictField(required=False, default=dict, help_text=f"{about}: {', '.join(keys)}.")


def input_error(exc: JobInputError, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({exc.field: [str(exc)]}, status=code)


class JobsApiView(APIView):
    """Campaigns by id and lists paginated with the settings' class; ``legacy`` serves the /models/api/ aliases.

    A plain APIView, not a GenericAPIView: its views have no one serializer, and the browsable API and OPTIONS
    would ask a GenericAPIView for one."""

    legacy = False
    schema = JobsSchema()
    # The schema documents GET lists with it too; the settings hold the class itself (DRF imports the path).
    pagination_class = cast(type[BasePagination], api_settings.DEFAULT_PAGINATION_CLASS)

    def handle_exception(self, exc: Exception) -> Response:
        """A service's ``NotAllowed`` (the rule it checks for every caller) is a 403 with its message."""
        return super().handle_exception(PermissionDenied(str(exc)) if isinstance(exc, NotAllowed) else exc)

    def campaign(self, key: dict[str, Any], *, start: str = "", may: Predicate = can_start_labeling_round) -> Campaign:
        """The campaign named in the path, if the user may work on it (404 otherwise: existence is not revealed);
        to ``start`` work they must also pass ``may`` (403 naming ``start`` before the body is read; the service
        asks the same predicate)."""
        lookup = {"slug": key["slug"]} if self.legacy else {"pk": key["campaign_id"]}
        campaign = Campaign.objects.filter(**lookup).first()
        if campaign is None or not can_research(self.request.user, campaign):
            raise NotFound("no such campaign")
        if start and not may(self.request.user, campaign):
            raise PermissionDenied(f"only staff and the campaign's admins start {start}")
        return campaign

    def valid(self, serializer: type[serializers.Serializer]) -> dict[str, Any]:
        """The request body's values as ``serializer`` cleans them (400 naming the fields at fault)."""
        data = serializer(data=self.request.data)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def out(self, serializer: type[serializers.BaseSerializer], instance: Any, *, many: bool = False) -> Any:
        """``instance`` as ``serializer`` writes it, with the server's folders taken off every path in it."""
        return shown(serializer(instance, many=many, context={"request": self.request, "legacy": self.legacy}).data)

    def listing(self, rows: QuerySet[Any], output: type[serializers.BaseSerializer], *, cut: int | None = None,
                extend: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Response:
        """One page of ``rows`` as ``output`` renders them (``?limit=&offset=``), each row ``extend``-ed when given;
        at the aliases, the first ``cut`` rows as a plain list."""
        def render(page: Iterable[Any]) -> list[Any]:
            answered = self.out(output, page, many=True)
            return [extend(row) for row in answered] if extend is not None else answered

        if self.legacy:
            return Response(render(rows[:cut] if cut is not None else rows))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, self.request, view=self)
        return paginator.get_paginated_response(render(page if page is not None else rows))


class OneJobView(JobsApiView):
    """The views of one job by id (``one_job_views``): the job of ``rows`` with that id, if the user may work on
    its ``campaign_of`` (404 ``missing`` otherwise: its existence is not revealed), answered as ``output`` (the
    schema's 200 too); the class's docstring describes the operation."""

    rows: ClassVar[QuerySet[Any]]
    campaign_of: ClassVar[Callable[[Any], Campaign | None]]
    missing: ClassVar[str]
    output: ClassVar[type[serializers.BaseSerializer]]

    def answer(self, pk: int) -> Response:
        return Response(self.out(self.output, self.find(pk)))

    def find(self, pk: int) -> Any:
        require_area(self.request)
        job = self.rows.filter(pk=pk).first()
        if job is None or not can_research(self.request.user, type(self).campaign_of(job)):
            raise NotFound(self.missing)
        return job


class JobDetailView(OneJobView):
    def get(self, request: Request, pk: int) -> Response:
        return self.answer(pk)


class JobCancelView(OneJobView):
    #: the service that cancels it (a queued one at once, a running one when its watcher next polls)
    cancel: ClassVar[Callable[[Any], object]]

    @extend_schema(request=None)
    def post(self, request: Request, pk: int) -> Response:
        type(self).cancel(self.find(pk))
        return self.answer(pk)  # read again: the cancel wrote the status


def one_job_views(*, rows: QuerySet[Any], campaign_of: Callable[[Any], Campaign | None], missing: str,
                  output: type[serializers.BaseSerializer], cancel: Callable[[Any], object], about: str,
                  about_cancel: str) -> tuple[type[JobDetailView], type[JobCancelView]]:
    """The GET view of one kind of job and its cancel POST; ``about``, ``about_cancel``: what each answers (the
    schema's descriptions)."""
    shared = {"__module__": __name__, "rows": rows, "campaign_of": staticmethod(campaign_of), "missing": missing,
              "output": output}
    name = output.__name__.removesuffix("Out")
    return (type(f"{name}View", (JobDetailView,), {**shared, "__doc__": about}),
            type(f"{name}CancelView", (JobCancelView,), {**shared, "__doc__": about_cancel,
                                                          "cancel": staticmethod(cancel)}))


class CampaignJobsView(JobsApiView):
    """A campaign's launched jobs of one kind, ``job_output``'s model: GET lists them, newest first; POST starts
    one from ``start_input`` with ``start_job`` (staff and the campaign's admins only), answered as ``job_output``.
    ``about``, ``about_start``: what each operation does (the schema's descriptions)."""

    job_output: ClassVar[type[serializers.ModelSerializer[Any]]]
    start_input: ClassVar[type[serializers.Serializer]]
    about: ClassVar[str]
    about_start: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(description=cls.about, responses={200: cls.job_output(many=True)}),
            post=extend_schema(description=cls.about_start, request=cls.start_input, responses={201: cls.job_output}),
        )(cls)

    @property
    def model(self) -> type[models.SamplingJob | models.MachineLabelingJob]:
        """The kind's model (``job_output``'s)."""
        return self.job_output.Meta.model

    def get(self, request: Request, **key: Any) -> Response:
        campaign = self.campaign(key)
        jobs = self.model._default_manager.filter(campaign=campaign).select_related("campaign")
        return self.listing(jobs, self.job_output, cut=100)

    def post(self, request: Request, **key: Any) -> Response:
        campaign = self.campaign(key, start=str(self.model._meta.verbose_name_plural), may=self.may_start)
        values = self.valid(self.start_input)
        try:
            job = self.start_job(campaign, values)
        except JobInputError as exc:
            return input_error(exc)
        return Response(self.out(self.job_output, job), status=status.HTTP_201_CREATED)

    def may_start(self, user: Any, campaign: Campaign) -> bool:
        """Who may start one: the predicate of ``annotate.permissions`` its service asks, asked here before the
        body is read."""
        raise NotImplementedError

    def start_job(self, campaign: Campaign, values: dict[str, Any]) -> models.LaunchedJob:
        raise NotImplementedError




def require_area(request: Request) -> None:
    if not can_research_any(request.user):
        raise PermissionDenied("reward models are for campaign admins, researchers and staff")

"""What the sampling and machine labeling APIs share: a served endpoint chosen by id, and the POST that resumes a
job of theirs that stopped (``resume_sampling_job``, ``resume_machine_labeling_job``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from annotate.models import Campaign
from annotate.permissions import Predicate
from endpoints.models import Endpoint
from endpoints.selectors import usable_endpoints

from ..services.sampling import ENDPOINT
from ..services.training import JobInputError
from .base import OneJobView, input_error


def usable_endpoint(user: Any, campaign: Campaign, pk: int | None) -> Endpoint | None:
    """The endpoint ``pk`` if ``user`` may use it in ``campaign`` (None when none is asked for); one they may not
    use reads as one that does not exist."""
    if pk is None:
        return None
    endpoint = usable_endpoints(user, campaign).filter(pk=pk).first()
    if endpoint is None:
        raise JobInputError(ENDPOINT, f"no endpoint {pk} you may use in campaign {campaign.slug}")
    return endpoint


class JobResumeView(OneJobView):
    """POST: a new job that continues the one by id, answered 201; 403 unless the user ``may`` start such jobs,
    409 naming the reason when it cannot be resumed."""

    may: ClassVar[Predicate]
    resume: ClassVar[Callable[..., Any]]

    def post(self, request: Request, pk: int) -> Response:
        job = self.find(pk)
        if not type(self).may(request.user, job.campaign):
            raise PermissionDenied("only staff and the campaign's admins resume these jobs")
        try:
            resumed = type(self).resume(job, user=request.user)
        except JobInputError as exc:
            return input_error(exc, status.HTTP_409_CONFLICT)
        return Response(self.out(self.output, resumed), status=status.HTTP_201_CREATED)


def resume_view(*, rows: QuerySet[Any], output: type[serializers.BaseSerializer], missing: str, may: Predicate,
                resume: Callable[..., Any], about: str) -> type[JobResumeView]:
    """The resume POST of one kind of job: ``resume`` (its service) for users who ``may`` start it."""
    return extend_schema(description=about, request=None, responses={201: output})(type(
        f"{output.__name__.removesuffix('Out')}ResumeView", (JobResumeView,),
        {"__module__": __name__, "__doc__": about, "rows": rows, "campaign_of": staticmethod(lambda job: job.campaign),
         "missing": missing, "output": output, "may": staticmethod(may), "resume": staticmethod(resume)}))

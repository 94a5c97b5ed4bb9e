"""Resume a sampling or Monte-Carlo machine labeling job that stopped, from its work page: a POST that calls the
kind's resume service and opens the new job's page."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from annotate.permissions import Predicate, can_research, can_start_machine_labeling, can_start_sampling

from .kinds import registry
from .models import JobStatus, LabelingMethod
from .services.machine_labeling import resume_machine_labeling_job
from .services.sampling import resume_sampling_job
from .services.training import JobInputError


class Resumer(NamedTuple):
    may: Predicate
    resume: Callable[..., Any]
    #: whether a job of the kind can be resumed once it stopped (a PRM's scores are started again instead)
    applies: Callable[[Any], bool]


#: by work page (``rewards.jobs.kinds``' ``page``)
RESUMERS = {
    "sampling": Resumer(can_start_sampling, resume_sampling_job, lambda job: True),
    "machine-labels": Resumer(can_start_machine_labeling, resume_machine_labeling_job,
                              lambda job: job.method == LabelingMethod.MC),
}


def may_resume(user: Any, kind: str, job: Any) -> bool:
    """Whether the page offers ``user`` to resume ``job``: a stopped job of a resumable kind, a user who may start
    such jobs."""
    resumer = RESUMERS.get(kind)
    return (resumer is not None and job.status in (JobStatus.FAILED, JobStatus.CANCELLED) and resumer.applies(job)
            and resumer.may(user, job.campaign))


@login_required
@require_POST
def work_resume(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """403 unless the user may start such jobs, 409 with the reason when the job cannot be resumed."""
    work, resumer = registry.pages()[kind], RESUMERS[kind]
    job = get_object_or_404(work.model.objects.select_related(*work.related), pk=pk)
    if not can_research(request.user, work.campaign_of(job)):
        raise Http404("no such job")
    if not resumer.may(request.user, job.campaign):
        raise PermissionDenied("only staff and the campaign's admins resume these jobs")
    try:
        resumed = resumer.resume(job, user=request.user)
    except JobInputError as error:
        return HttpResponse(str(error), status=409, content_type="text/plain")
    return redirect(f"jobs:{kind}_job", pk=resumed.pk)

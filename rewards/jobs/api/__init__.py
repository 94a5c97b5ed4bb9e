"""REST endpoints of reward-model work under /api/, the same services as the pages.

* ``GET/POST /api/jobs/`` — training jobs: list (``?campaign=ID&status=``), start one; ``GET /api/jobs/<id>/``
  (progress, loss curve, metrics, error, the registered model); ``POST /api/jobs/<id>/cancel/``.
* The loop: ``POST /api/campaigns/<id>/snapshot/`` (a dataset version), ``GET/POST …/campaigns/<id>/pools/``
  (upload, multipart), ``GET/POST …/campaigns/<id>/scoring/``, ``GET /api/scoring/<id>/`` and
  ``POST /api/scoring/<id>/cancel/``, ``POST …/campaigns/<id>/evaluations/``, ``GET/POST …/campaigns/<id>/comparisons/``
  (one-click PRM vs ORM), ``GET /api/comparisons/<id>/``, ``POST /api/comparisons/<id>/cancel/``.
* ``GET/POST /api/campaigns/<id>/generations/`` — a campaign's generations, start the next one;
  ``GET/POST /api/campaigns/<id>/sampling/`` — sampling jobs; ``GET/POST …/campaigns/<id>/machine-labeling/`` —
  Monte-Carlo or PRM step labels. Both take an optional ``endpoint`` (a served-model endpoint's id the user may use)
  as their backend; ``POST /api/sampling/<id>/resume/`` and ``POST /api/machine-labeling/<id>/resume/`` continue a
  stopped job, keeping what it finished.

Who may: staff and the campaign's admins and researchers read and run the work; starting generations and sampling
is for staff and its admins (``annotate.permissions``). Everyone else gets 404 for the campaign or job (its
existence is not revealed), or 403 when they may read but not start. Authentication, scopes and pagination are the
settings' (as for the rest of /api/). Errors: ``{field: [messages]}`` for the input at fault, ``{"detail": message}``
otherwise.

``/models/api/…`` (the same paths with the campaign's slug in place of its id) are kept for existing scripts:
same views with ``legacy=True`` — campaigns by slug in paths, filters and answers, lists unpaginated and cut at
their old lengths — left out of the schema.
"""
from __future__ import annotations

from django.urls import URLPattern, path

from .base import JobsApiView
from .loop import EvaluationsView, PoolsView, SnapshotView

#: the routes of no kind of job: (path, view, name), ``{campaign}`` in the path
LOOP_ROUTES = (
    ("campaigns/{campaign}/snapshot/", SnapshotView, "snapshot"),
    ("campaigns/{campaign}/pools/", PoolsView, "pools"),
    ("campaigns/{campaign}/evaluations/", EvaluationsView, "evaluations"),
)


def routes() -> list[tuple[str, type[JobsApiView], str]]:
    """Every route of the jobs API: the loop's, then each job kind's (``rewards.jobs.kinds``)."""
    from ..kinds.registry import kinds

    return [*LOOP_ROUTES, *(route for kind in kinds() for route in kind.routes)]


def urls(*, legacy: bool = False) -> list[URLPattern]:
    """The routes under /api/ (names like ``scoring-job-cancel``), or, ``legacy``, the /models/api/ aliases
    under their old names (``api_scoring_job_cancel``): campaigns by slug, out of the schema."""
    if legacy:
        return [path("api/" + route.format(campaign="<slug:slug>"), view.as_view(legacy=True, schema=None),
                     name=f"api_{name}") for route, view, name in routes()]
    return [path(route.format(campaign="<id:campaign_id>"), view.as_view(), name=name.replace("_", "-"))
            for route, view, name in routes()]

"""Reward-model pages, mounted at /models/."""
from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from django.urls import URLPattern, path

from . import api, views, views_llm_judge, views_resume
from .kinds.registry import pages

app_name = "jobs"


def job_pages(prefix: str, name: str, detail: Callable[..., HttpResponse], progress: Callable[..., HttpResponse],
              cancel: Callable[..., HttpResponse], kwargs: dict[str, Any] | None = None) -> list[URLPattern]:
    """A job's page at ``prefix``, its polled progress fragment and its cancel POST: ``name``, ``name``_progress,
    ``name``_cancel (``kwargs``: passed to each view)."""
    return [path(prefix, detail, kwargs, name=name),
            path(f"{prefix}progress/", progress, kwargs, name=f"{name}_progress"),
            path(f"{prefix}cancel/", cancel, kwargs, name=f"{name}_cancel")]


urlpatterns = [
    path("", views.index, name="index"),
    path("jobs/new/", views.job_new, name="job_new"),
    *job_pages("jobs/<id:pk>/", "job", views.job_detail, views.job_progress, views.job_cancel),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/figures/<str:name>.<str:fmt>", views.figure, name="figure"),
    path("dashboard/<slug:slug>/", views.dashboard, name="campaign_dashboard"),
    path("dashboard/<slug:slug>/figures/<str:name>.<str:fmt>", views.figure, name="campaign_figure"),
    path("dashboard/<slug:slug>/labeling-rounds/start/", views.labeling_round_start, name="labeling_round_start"),
    # deprecated alias: the first path and name of the labeling round's start, kept for forms and scripts
    path("dashboard/<slug:slug>/generations/start/", views.labeling_round_start, name="generation_start"),
    path("dashboard/<slug:slug>/sampling/start/", views.sampling_start, name="sampling_start"),
    path("dashboard/<slug:slug>/machine-labels/start/", views.machine_labels_start, name="machine_labels_start"),
    path("dashboard/<slug:slug>/llm-judge/", views_llm_judge.llm_judge_start, name="llm_judge_start"),
    path("dashboard/<slug:slug>/llm-judge/<id:pk>/resume/", views_llm_judge.llm_judge_resume,
         name="llm_judge_resume"),
    path("dashboard/<slug:slug>/compare/", views.compare_start, name="compare_start"),
    path("dashboard/<slug:slug>/snapshot/", views.snapshot, name="snapshot"),
    path("dashboard/<slug:slug>/pools/upload/", views.pool_upload, name="pool_upload"),
    path("dashboard/<slug:slug>/score/", views.score_start, name="score_start"),
    path("dashboard/<slug:slug>/evaluate/", views.evaluate_start, name="evaluate_start"),
    path("comparisons/<id:pk>/progress/", views.comparison_progress, name="comparison_progress"),
    path("comparisons/<id:pk>/cancel/", views.comparison_cancel, name="comparison_cancel"),
    *[path(f"{kind}/<id:pk>/resume/", views_resume.work_resume, {"kind": kind}, name=f"{kind}_job_resume")
      for kind in views_resume.RESUMERS],
    *[route for kind in pages() for route in job_pages(
        f"{kind}/<id:pk>/", f"{kind}_job", views.work_detail, views.work_progress, views.work_cancel, {"kind": kind})],
    *api.urls(legacy=True),  # the jobs API's first home, kept for scripts; /api/ is the documented one
]

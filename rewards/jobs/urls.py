"""Reward-model pages, mounted at /models/."""
from django.urls import path

from . import api, views

app_name = "jobs"

urlpatterns = [
    path("", views.index, name="index"),
    path("jobs/new/", views.job_new, name="job_new"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/progress/", views.job_progress, name="job_progress"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/figures/<str:name>.<str:fmt>", views.figure, name="figure"),
    path("dashboard/<slug:slug>/", views.dashboard, name="campaign_dashboard"),
    path("dashboard/<slug:slug>/figures/<str:name>.<str:fmt>", views.figure, name="campaign_figure"),
    path("dashboard/<slug:slug>/generations/start/", views.generation_start, name="generation_start"),
    path("dashboard/<slug:slug>/sampling/start/", views.sampling_start, name="sampling_start"),
    path("dashboard/<slug:slug>/machine-labels/start/", views.machine_labels_start, name="machine_labels_start"),
    path("dashboard/<slug:slug>/compare/", views.compare_start, name="compare_start"),
    path("dashboard/<slug:slug>/snapshot/", views.snapshot, name="snapshot"),
    path("dashboard/<slug:slug>/pools/upload/", views.pool_upload, name="pool_upload"),
    path("dashboard/<slug:slug>/score/", views.score_start, name="score_start"),
    path("dashboard/<slug:slug>/evaluate/", views.evaluate_start, name="evaluate_start"),
    path("comparisons/<int:pk>/progress/", views.comparison_progress, name="comparison_progress"),
    path("comparisons/<int:pk>/cancel/", views.comparison_cancel, name="comparison_cancel"),
    *[route for kind in views.WORK for route in (
        path(f"{kind}/<int:pk>/", views.work_detail, {"kind": kind}, name=f"{kind}_job"),
        path(f"{kind}/<int:pk>/progress/", views.work_progress, {"kind": kind}, name=f"{kind}_job_progress"),
        path(f"{kind}/<int:pk>/cancel/", views.work_cancel, {"kind": kind}, name=f"{kind}_job_cancel"))],
    *api.urls(legacy=True),  # the jobs API's first home, kept for scripts; /api/ is the documented one
]

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
    path("api/campaigns/<slug:slug>/generations/", api.GenerationsView.as_view(), name="api_generations"),
    path("api/campaigns/<slug:slug>/sampling/", api.SamplingJobsView.as_view(), name="api_sampling"),
    path("api/jobs/", api.TrainingJobsView.as_view(), name="api_jobs"),
    path("api/jobs/<int:pk>/", api.TrainingJobView.as_view(), name="api_job"),
    path("api/jobs/<int:pk>/cancel/", api.TrainingJobCancelView.as_view(), name="api_job_cancel"),
]

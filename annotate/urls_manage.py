"""The campaign admin workspace: /manage/…"""
from django.urls import path

from . import views_manage as views

app_name = "manage"

urlpatterns = [
    path("", views.index, name="index"),
    path("new", views.campaign_new, name="new"),
    path("c/<slug:slug>/", views.dashboard, name="dashboard"),
    path("c/<slug:slug>/edit", views.campaign_edit, name="edit"),
    path("c/<slug:slug>/archive", views.campaign_archive, name="archive"),
    path("c/<slug:slug>/metrics/refresh", views.metrics_refresh, name="metrics_refresh"),
    path("c/<slug:slug>/members/", views.members, name="members"),
    path("c/<slug:slug>/members/<int:user_id>/", views.labeler, name="labeler"),
    path("c/<slug:slug>/members/<int:user_id>/state", views.member_state, name="member_state"),
    path("c/<slug:slug>/imports/", views.imports, name="imports"),
    path("c/<slug:slug>/imports/<int:job_id>/", views.import_job, name="import"),
    path("c/<slug:slug>/imports/<int:job_id>/progress", views.import_progress, name="import_progress"),
    path("c/<slug:slug>/adjudication/", views.adjudication_list, name="adjudication"),
    path("c/<slug:slug>/adjudication/<int:solution_id>/", views.adjudication_review, name="review"),
    path("c/<slug:slug>/split-reports/", views.split_reports, name="split_reports"),
    path("c/<slug:slug>/solutions/<int:solution_id>/resplit", views.resplit_view, name="resplit"),
]

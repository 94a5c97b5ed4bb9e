"""The campaign admin workspace: /manage/…"""
from django.urls import include, path

from . import views_manage as views

app_name = "manage"

urlpatterns = [
    path("", views.index, name="index"),
    path("new", views.campaign_new, name="new"),
    path("c/<slug:slug>/", include([  # one campaign's pages
        path("", views.dashboard, name="dashboard"),
        path("edit", views.campaign_edit, name="edit"),
        path("archive", views.campaign_archive, name="archive"),
        path("metrics/refresh", views.metrics_refresh, name="metrics_refresh"),
        path("members/", views.members, name="members"),
        path("members/<id:user_id>/", views.labeler, name="labeler"),
        path("members/<id:user_id>/state", views.member_state, name="member_state"),
        path("imports/", views.imports, name="imports"),
        path("imports/<id:job_id>/", views.import_job, name="import"),
        path("imports/<id:job_id>/progress", views.import_progress, name="import_progress"),
        path("adjudication/", views.adjudication_list, name="adjudication"),
        path("adjudication/<id:solution_id>/", views.adjudication_review, name="review"),
        path("split-reports/", views.split_reports, name="split_reports"),
        path("solutions/<id:solution_id>/resplit", views.resplit_view, name="resplit"),
    ])),
]

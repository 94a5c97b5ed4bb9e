from django.urls import path

from . import views

app_name = "annotate"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("c/<slug:slug>/", views.campaign_page, name="campaign"),
    path("c/<slug:slug>/start", views.start, name="start"),
    path("assignments/<int:assignment_id>/", views.workspace, name="workspace"),
    path("assignments/<int:assignment_id>/rate", views.rate, name="rate"),
    path("assignments/<int:assignment_id>/flag", views.flag, name="flag"),
    path("assignments/<int:assignment_id>/bad-split", views.bad_split, name="bad_split"),
    path("assignments/<int:assignment_id>/decide", views.decide, name="decide"),
    path("assignments/<int:assignment_id>/finish", views.finish, name="finish"),
    path("assignments/<int:assignment_id>/next", views.next_solution, name="next"),
    path("assignments/<int:assignment_id>/heartbeat", views.heartbeat, name="heartbeat"),
    path("assignments/<int:assignment_id>/resume", views.resume, name="resume"),
]

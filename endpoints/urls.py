"""/manage/endpoints/ (staff-wide) and /manage/c/<slug>/endpoints/ (one campaign's), namespace ``endpoints``."""
from django.urls import path

from . import views

app_name = "endpoints"

urlpatterns = [
    path("endpoints/", views.staff_endpoints, name="staff"),
    path("c/<slug:slug>/endpoints/", views.campaign_endpoints, name="campaign"),
]

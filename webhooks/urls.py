"""/manage/c/<slug>/webhooks/: one campaign's webhooks (namespace ``webhooks``)."""
from django.urls import path

from . import views

app_name = "webhooks"

urlpatterns = [
    path("", views.campaign_webhooks, name="campaign"),
]

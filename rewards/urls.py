"""Researcher pages (HTML, session login), namespace ``pages``. Their paths stay under /api/ where they were
first published (the README and scripts link them); the API itself is ``steplab.api_urls``."""
from django.urls import path

from . import views

app_name = "pages"

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.revoke, name="token-revoke"),
    path("researcher/datasets/", views.datasets_page, name="datasets"),
]

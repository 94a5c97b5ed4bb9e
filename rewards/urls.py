"""Researcher pages (HTML, session login), namespace ``pages``. Their paths stay under /api/ where they were
first published (the docs and scripts link them); the API itself is ``steplab.api_urls``. The token pages are
the ``api`` app's (``api.urls``), kept in this namespace under their first names."""
from django.urls import include, path

from . import views

app_name = "pages"

urlpatterns = [
    path("", include("api.urls")),
    path("researcher/datasets/", views.datasets_page, name="datasets"),
]

"""The token pages, /api/tokens/. They keep the names they were published under (``pages:tokens``,
``pages:token-revoke``): ``rewards.urls`` includes these patterns in its ``pages`` namespace, so no name moves."""
from django.urls import path

from . import views

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<id:token_id>/revoke/", views.revoke, name="token-revoke"),
]

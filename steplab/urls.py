from django.contrib import admin
from django.urls import include, path

from .auth_views import RateLimitedLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", RateLimitedLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("rewards.urls")),
    path("manage/", include("annotate.urls_manage")),
    path("models/", include("rewards.jobs.urls")),
    path("", include("annotate.urls")),
]

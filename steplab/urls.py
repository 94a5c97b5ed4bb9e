from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("rewards.urls")),
    path("manage/", include("annotate.urls_manage")),
    path("models/", include("rewards.jobs.urls")),
    path("", include("annotate.urls")),
]

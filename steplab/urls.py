from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from .auth_views import RateLimitedLoginView, RateLimitedPasswordChangeView, admin_login


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on their own; pages name the SVG in <link rel="icon">."""
    return HttpResponsePermanentRedirect(static("steplab/favicon.svg"))


urlpatterns = [
    path("admin/login/", admin_login),  # before the admin's own URLs: the same limiter as the site login
    path("admin/", admin.site.urls),
    path("favicon.ico", favicon),
    path("accounts/login/", RateLimitedLoginView.as_view(), name="login"),
    # Only the auth views Steplab uses: no e-mail password reset (accounts are created by campaign admins).
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", RateLimitedPasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("api/", include("rewards.urls")),  # the researcher pages (namespace pages)
    path("api/", include("steplab.api_urls")),
    path("manage/", include("endpoints.urls")),
    path("manage/", include("annotate.urls_manage")),
    path("manage/c/<slug:slug>/webhooks/", include("webhooks.urls")),
    path("models/", include("rewards.jobs.urls")),
    path("", include("annotate.urls")),
]

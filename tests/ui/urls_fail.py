"""The site's URL conf plus one view that fails, to see the 500 page as a visitor does."""
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def fail(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a failure the 500 page must not show")


urlpatterns = [path("ui-test/fail", fail), path("", include("steplab.urls"))]

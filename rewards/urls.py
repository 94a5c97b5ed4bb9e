from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from . import views
from .api import views as api

app_name = "api"

router = DefaultRouter()
router.register("campaigns", api.CampaignViewSet, basename="campaign")
router.register("problems", api.ProblemViewSet, basename="problem")
router.register("solutions", api.SolutionViewSet, basename="solution")
router.register("labels", api.LabelViewSet, basename="label")
router.register("assignments", api.AssignmentViewSet, basename="assignment")
router.register("datasets", api.DatasetVersionViewSet, basename="dataset")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.revoke, name="token-revoke"),
    path("researcher/datasets/", views.datasets_page, name="datasets-page"),
    path("", include(router.urls)),
]

"""/api/endpoints/: list, register, remove and test endpoints, with explicit input and output serializers. The
output says whether a key is set, never the key. Who may do what is ``annotate.permissions``' call."""
from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from annotate import permissions

from . import services
from .models import Endpoint
from .services import MAX_CONCURRENCY, MAX_TIMEOUT_S, MAX_TOKEN_BUDGET


class EndpointOutSerializer(serializers.ModelSerializer):
    campaign = serializers.CharField(source="campaign.slug", read_only=True, allow_null=True)
    has_api_key = serializers.BooleanField(read_only=True)

    class Meta:
        model = Endpoint
        fields = ["id", "campaign", "name", "base_url", "model", "has_api_key", "max_concurrency", "timeout_s",
                  "token_budget", "registered_by_staff", "created_at"]
        read_only_fields = fields


class EndpointInSerializer(serializers.Serializer):
    campaign = serializers.SlugField(required=False, allow_null=True, default=None,
                                     help_text="the campaign's slug; omitted or null: staff-wide (staff only)")
    name = serializers.CharField(max_length=100)
    base_url = serializers.CharField(max_length=2000)
    model = serializers.CharField(max_length=200)
    api_key = serializers.CharField(max_length=1000, required=False, default="", allow_blank=True,
                                    write_only=True, trim_whitespace=True)
    max_concurrency = serializers.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=4)
    timeout_s = serializers.FloatField(min_value=0.1, max_value=MAX_TIMEOUT_S, default=60.0)
    token_budget = serializers.IntegerField(min_value=1, max_value=MAX_TOKEN_BUDGET, default=200_000)


class ConnectionOutSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField()


class EndpointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                      viewsets.GenericViewSet):
    """Endpoints of the campaigns the user manages, and the staff-wide ones for staff."""

    permission_classes = [IsAuthenticated]
    serializer_class = EndpointOutSerializer

    def get_queryset(self) -> QuerySet[Endpoint]:
        user = self.request.user
        visible = Q(campaign__in=permissions.managed_campaigns(user))
        if permissions.can_manage_endpoints(user, None):
            visible |= Q(campaign__isnull=True)
        return Endpoint.objects.filter(visible).select_related("campaign")

    @extend_schema(request=EndpointInSerializer, responses={201: EndpointOutSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        given = EndpointInSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = dict(given.validated_data)
        slug = data.pop("campaign")
        campaign = None
        if slug is not None:
            campaign = permissions.member_campaigns(request.user).filter(slug=slug).first()
            if campaign is None:
                raise ValidationError({"campaign": [f"No campaign {slug!r} of yours."]})
        try:
            endpoint = services.register_endpoint(request.user, campaign=campaign, **data)
        except permissions.NotAllowed as refused:
            raise PermissionDenied(str(refused)) from None
        except services.EndpointRefused as refused:
            raise ValidationError({refused.field: [str(refused)]}) from None
        return Response(EndpointOutSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: Endpoint) -> None:
        try:
            services.delete_endpoint(self.request.user, endpoint=instance)
        except permissions.NotAllowed as refused:
            raise PermissionDenied(str(refused)) from None

    @extend_schema(request=None, responses={200: ConnectionOutSerializer})
    @action(detail=True, methods=["post"], url_path="test-connection")
    def test_connection(self, request: Request, pk: str | None = None) -> Response:
        ok, message = services.check_connection(request.user, endpoint=self.get_object())
        return Response(ConnectionOutSerializer({"ok": ok, "message": message}).data)


ROUTES: list[tuple[str, type[viewsets.GenericViewSet], str]] = [("endpoints", EndpointViewSet, "endpoint")]

"""DRF authentication by personal API token (``Authorization: Bearer stp_…``) and its scope check."""
from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from .models import ApiToken
from .services import authenticate_token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header: expected 'Bearer stp_…'.")
        token = authenticate_token(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed("API token is invalid or revoked.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class TokenScope(permissions.BasePermission):
    """A read-scoped token may only use safe methods; session users are not limited by scope."""

    message = "This API token is read-only (scope 'read'); create a 'write' token to change data."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if isinstance(token, ApiToken) and request.method not in permissions.SAFE_METHODS:
            return token.scope == ApiToken.Scope.WRITE
        return True


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "stp_…"}

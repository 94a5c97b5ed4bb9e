"""Property-based run of every operation in the OpenAPI schema (schemathesis over the WSGI app): no 5xx, and every
documented answer (status, content type, body) conforms to the schema."""
from __future__ import annotations

import pytest
import schemathesis
from schemathesis.checks import content_type_conformance, response_schema_conformance
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.test import APIClient

from .conftest import token_client

pytestmark = pytest.mark.django_db
EXAMPLES = 25


def test_schema_and_swagger_ui_are_served_offline(people) -> None:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_login(people["researcher"])
    schema = client.get("/api/schema/?format=json").json()
    assert "/api/datasets/{id}/files/{fmt}/" in schema["paths"] and "apiToken" in schema["components"]["securitySchemes"]
    docs = client.get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()


@pytest.fixture
def keep_test_connection():  # type: ignore[no-untyped-def]
    """As Django's test client does: requests must not close the test transaction's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_no_operation_answers_5xx(people, version, keep_test_connection) -> None:  # type: ignore[no-untyped-def]
    _, raw = token_client(people["owner"], "write")
    app = get_wsgi_application()
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", app)
    headers = {"Authorization": f"Bearer {raw}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    failures: list[str] = []
    violations: list[str] = []
    statuses: set[int] = set()
    for operation in operations:
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(headers=headers)
            statuses.add(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}")
                return
            try:  # a documented answer must match its schema (error statuses are not documented: not checked)
                case.validate_response(response, checks=[response_schema_conformance, content_type_conformance])
            except Exception as violation:  # noqa: BLE001 - schemathesis raises a group of check failures
                violations.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                  f"{str(violation)[:300]}")

        check()
    assert not failures, failures[:10]
    assert not violations, violations[:5]
    assert {200, 400, 404} <= statuses, f"the run must reach real answers, saw {sorted(statuses)}"

"""Property-based run of every operation in the OpenAPI schema (schemathesis over the WSGI app) as every role
(anonymous, the campaign's labeler, researcher and admin, a researcher of another campaign, staff): no 5xx, and every
documented answer (status, content type, body) conforms to the schema. ``STEPLAB_SCHEMA_FUZZ_EXAMPLES`` sets the
examples per operation per role (the suite's default keeps it to minutes; the probe's bound is 50)."""
from __future__ import annotations

import json
import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.test import APIClient
from schemathesis.checks import content_type_conformance, response_schema_conformance

from .conftest import token_client

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("STEPLAB_SCHEMA_FUZZ_EXAMPLES", "5"))
ROLES = ("anonymous", "labeler", "researcher", "owner", "outsider", "staff")


def test_schema_and_swagger_ui_are_served_offline(people) -> None:
    client = APIClient()
    client.force_login(people["researcher"])
    schema = client.get("/api/schema/?format=json").json()
    assert ("/api/datasets/{id}/files/{fmt}/" in schema["paths"]
            and "apiToken" in schema["components"]["securitySchemes"])
    docs = client.get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()


@pytest.fixture
def keep_test_connection():
    """As Django's test client does: requests must not close the test transaction's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.parametrize("role", ROLES)
def test_no_operation_answers_5xx(people, version, keep_test_connection, role: str) -> None:
    headers = {}
    if role != "anonymous":
        _, raw = token_client(people[role], "write")
        headers = {"Authorization": f"Bearer {raw}"}
    app = get_wsgi_application()
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 45, "every operation of the schema"
    failures: list[str] = []
    violations: list[str] = []
    statuses: set[int] = set()
    sent = [0]
    for operation in operations:
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case) -> None:
            response = case.call(headers=headers)
            sent[0] += 1
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
    print(json.dumps({"role": role, "operations": len(operations), "examples_per_operation": EXAMPLES,
                      "requests": sent[0], "statuses": sorted(statuses), "5xx": len(failures)}))
    assert not failures, failures[:10]
    assert not violations, violations[:5]
    if role == "anonymous":  # every operation refuses without credentials
        assert statuses == {401}, f"saw {sorted(statuses)}"
    else:
        assert {200, 400, 404} <= statuses, f"the run must reach real answers, saw {sorted(statuses)}"


# --- shapes the generated cases do not reach: each a 400 naming what is wrong, never a 500 ------------------

DEEP = 50_000


def _deep(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def test_campaign_filter_out_of_range_or_not_ascii_is_a_400(people) -> None:
    client = APIClient()
    client.force_login(people["researcher"])
    wrong = []
    for path in ("/api/solutions/", "/api/datasets/", "/api/problems/", "/api/labels/"):
        for value in ("99999999999999999999", "\u00b2", "-1", "1e3", "9" * 5000):
            response = client.get(path, {"campaign": value})
            if response.status_code != 400 or "campaign" not in response.json():
                wrong.append(f"{path}?campaign={value[:20]}: {response.status_code}")
    assert not wrong, wrong


def test_deeply_nested_json_bodies_are_a_400(people, math500_campaign) -> None:
    from annotate.models import Assignment

    labeler = APIClient()
    labeler.force_login(people["labeler"])
    assignment = Assignment.objects.filter(labeler=people["labeler"]).first()
    assert assignment is not None
    owner = APIClient()
    owner.force_login(people["owner"])
    staff = APIClient()
    staff.force_login(people["staff"])
    for body in (_deep(), '{"a":' * DEEP + "1" + "}" * DEEP, _deep(65)):
        for client, url in ((labeler, f"/api/assignments/{assignment.pk}/rate/"),
                            (owner, f"/models/api/campaigns/{math500_campaign.slug}/generations/"),
                            (owner, f"/models/api/campaigns/{math500_campaign.slug}/sampling/"),
                            (staff, "/models/api/jobs/")):
            response = client.post(url, body, content_type="application/json")
            assert response.status_code == 400, (url, len(body), response.status_code)
            assert "nested more than 64 levels" in response.json()["detail"]
    # a JSON field inside an otherwise fine body: the generation's config
    config = '{"strategy": "random", "batch_size": 1, "config": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}"
    response = owner.post(f"/models/api/campaigns/{math500_campaign.slug}/generations/", config,
                          content_type="application/json")
    assert response.status_code == 400


def test_out_of_range_training_settings_name_the_field(people, version) -> None:
    client = APIClient()
    client.force_login(people["owner"])
    for hyper, field in (({"max_steps": 10**30}, "max_steps"), ({"batch_size": 2**63}, "batch_size"),
                         ({"seed": -(10**30)}, "seed"), ({"epochs": 1e308}, "epochs")):
        response = client.post("/models/api/jobs/", {"kind": "prm", "dataset_version": version.pk, "hyper": hyper},
                               format="json")
        assert response.status_code == 400 and field in response.json(), (hyper, response.content)
    for body, field in (({"kind": "prm", "dataset_version": 10**30}, "dataset_version"),):
        response = client.post("/models/api/jobs/", body, format="json")
        assert response.status_code == 400 and field in response.json(), (body, response.content)
    slug = version.campaign.slug
    for body, field in (({"strategy": "random", "batch_size": 10**30}, "batch_size"),
                        ({"strategy": "random", "batch_size": 1, "pool": 10**30}, "pool"),
                        ({"strategy": "random", "batch_size": 1, "reward_model": 10**30}, "reward_model")):
        response = client.post(f"/models/api/campaigns/{slug}/generations/", body, format="json")
        assert response.status_code == 400 and field in response.json(), (body, response.content)


def test_import_report_names_the_line_and_no_server_path(people, math500_campaign) -> None:
    import io
    import tempfile

    client = APIClient()
    client.force_login(people["owner"])
    lines = [json.dumps({"problem": "What is 1+1?", "steps": ["2", "# Answer\n\n2"]}), _deep(), "{not json"]
    upload = io.BytesIO(("\n".join(lines) + "\n").encode())
    upload.name = "mine.jsonl"
    response = client.post(f"/api/campaigns/{math500_campaign.pk}/import-solutions/", {"file": upload},
                           format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["file"] == "mine.jsonl"
    assert [(item["line"], "nested more than 64" in item["message"] or "not valid JSON" in item["message"])
            for item in body["rejected"] if item["line"] > 1] == [(2, True), (3, True)]
    text = response.content.decode()
    assert tempfile.gettempdir() not in text and "/tmp" not in text, text

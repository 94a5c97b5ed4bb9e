"""The browsable root /api/ lists every API under /api/: the labeling and dataset resources and the jobs API."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

BASE = "http://testserver/api/"


def test_root_lists_every_api(make_user) -> None:
    client = APIClient()
    client.force_authenticate(make_user("reader"))
    response = client.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    listed = response.json()
    # the router's lists, the one resource without a list (your assignments), the schema and its docs
    for name in ("campaigns", "problems", "solutions", "labels", "datasets"):
        assert listed[name] == f"{BASE}{name}/"
    assert listed["assignments"] == f"{BASE}assignments/{{pk}}/"
    assert listed["schema"] == f"{BASE}schema/" and listed["docs"] == f"{BASE}docs/"
    # the jobs API, by the names its URLs have; a path with an id is a URI template
    assert listed["jobs"] == f"{BASE}jobs/"
    assert listed["job-cancel"] == f"{BASE}jobs/{{pk}}/cancel/"
    assert listed["generations"] == f"{BASE}campaigns/{{campaign}}/generations/"  # the deprecated alias
    assert listed["labeling-rounds"] == f"{BASE}campaigns/{{campaign}}/labeling-rounds/"
    assert {"sampling", "snapshot", "pools", "scoring", "evaluations", "comparisons", "scoring-job",
            "scoring-job-cancel", "comparison", "comparison-cancel", "job"} <= set(listed)

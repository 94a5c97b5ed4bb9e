"""Numbers past what the database or a double holds, NaN, and strings built to break a parser: each is a 400 (or a
rejected import line) naming the field, never a 500."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotate.models import Campaign, Problem, Role
from rewards.jobs.models import CandidatePool, JobStatus, RewardModel, TrainingJob
from tests.factories import MembershipFactory, numbered_solution

pytestmark = pytest.mark.django_db

HUGE = 10**23


@dataclass
class Place:
    campaign: Campaign
    pool: CandidatePool
    model: RewardModel
    admin: Any
    solution_id: int


@pytest.fixture
def place(campaign_factory, make_user, tmp_path, settings) -> Place:
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    settings.MEDIA_ROOT = str(tmp_path)
    campaign = campaign_factory("hostile", name="Hostile")
    admin = make_user("hostile_admin")
    MembershipFactory(campaign=campaign, user=admin, role=Role.ADMIN)
    pool = CandidatePool.objects.create(name="p", campaign=campaign, pool_size=4)
    job = TrainingJob.objects.create(kind="prm", campaign=campaign, dataset_path="/x", status=JobStatus.SUCCEEDED)
    model = RewardModel.objects.create(job=job, kind="prm", campaign=campaign, name="prm", location="/m",
                                       base_model="default")
    return Place(campaign, pool, model, admin, numbered_solution(campaign).pk)


def _client(place: Place) -> Client:
    client = Client()
    client.force_login(place.admin)
    return client


# (method, url, body, field named in the 400)
REQUESTS: dict[str, tuple[str, str, Any, str]] = {
    "member id past 64 bits": ("get", "/manage/c/{slug}/members/{huge}/", None, ""),
    "member state id past 64 bits": ("post", "/manage/c/{slug}/members/{huge}/state", {"action": "pause"}, ""),
    "reward_models past 64 bits": ("json", "/api/campaigns/{id}/scoring/",
                                   {"pool": "{pool}", "reward_models": [HUGE]}, "reward_models"),
    "scoring pool past 64 bits": ("json", "/api/campaigns/{id}/scoring/",
                                  {"pool": HUGE, "reward_models": ["{model}"]}, "pool"),
    "solution_ids past 64 bits": ("json", "/api/campaigns/{id}/machine-labeling/",
                                  {"method": "prm", "reward_model": "{model}", "solution_ids": [HUGE]},
                                  "solution_ids"),
    "machine-labeling reward_model past 64 bits": ("json", "/api/campaigns/{id}/machine-labeling/",
                                                   {"method": "prm", "reward_model": HUGE}, "reward_model"),
    "per_problem 2^63": ("json", "/api/campaigns/{id}/comparisons/", {"per_problem": 2**63}, "per_problem"),
    "per_problem 2^31": ("json", "/api/campaigns/{id}/comparisons/", {"per_problem": 2**31}, "per_problem"),
    "evaluation scoring past 64 bits": ("json", "/api/campaigns/{id}/evaluations/", {"prm_scoring": HUGE},
                                        "prm_scoring"),
    "1e400 in a body": ("raw", "/api/campaigns/{id}/evaluations/", '{"trials": 1e400}', "trials"),
    "a device with a command after it": ("json", "/api/campaigns/{id}/sampling/",
                                         {"config": {"device": "cuda:0; rm -rf /"}}, "device"),
    "score form pool past 64 bits": ("post", "/models/dashboard/{slug}/score/", {"pool": HUGE, "models": "{model}"},
                                     "pool"),
    "evaluate form scoring past 64 bits": ("post", "/models/dashboard/{slug}/evaluate/", {"prm_scoring": HUGE},
                                           "prm_scoring"),
    "compare form per_problem 2^31": ("post", "/models/dashboard/{slug}/compare/", {"per_problem": 2**31},
                                      "per_problem"),
    "jobs list campaign past 64 bits": ("get", "/api/jobs/?campaign={huge}", None, "campaign"),
}


def _fill(value: Any, place: Place) -> Any:
    if isinstance(value, dict):
        return {key: _fill(item, place) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, place) for item in value]
    if value == "{pool}":
        return place.pool.pk
    if value == "{model}":
        return place.model.pk
    return value


@pytest.mark.parametrize("case", sorted(REQUESTS))
def test_a_hostile_number_is_a_client_error_naming_the_field(place: Place, case: str) -> None:
    method, url, body, field = REQUESTS[case]
    url = url.format(slug=place.campaign.slug, id=place.campaign.pk, huge=HUGE)
    client = _client(place)
    if method == "json":
        response = client.post(url, json.dumps(_fill(body, place)), content_type="application/json")
    elif method == "raw":
        response = client.post(url, body, content_type="application/json")
    elif method == "post":
        response = client.post(url, _fill(body, place))
    else:
        response = client.get(url)
    if not field:  # an id in the path: no such page
        assert response.status_code == 404, response.status_code
        return
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert field in response.content.decode()


def _pool_line(**extra: Any) -> dict[str, Any]:
    return {"problem": "What is 1+1?", "solution": "It is 2.", "answer": "2", "ground_truth": "2", **extra}


POOL_LINES: dict[str, tuple[str, str]] = {
    "NaN in provenance": (json.dumps(_pool_line(provenance={"temperature": float("nan")})), "provenance"),
    "Infinity in provenance": ('{"problem": "1+1?", "solution": "2", "provenance": {"t": Infinity}}', "provenance"),
    "1e400 in provenance": ('{"problem": "1+1?", "solution": "2", "provenance": {"t": 1e400}}', "provenance"),
    "nested brackets as responses": (json.dumps({"question": "q", "gold_answer": "1",
                                                 "generated_responses": "[" * 10**5 + "]" * 10**5}),
                                     "generated_responses"),
    "a long run of minus signs as responses": (json.dumps({"question": "q", "gold_answer": "1",
                                                           "generated_responses": "-" * 2 * 10**5 + "1"}),
                                               "generated_responses"),
    "a list of minus signs as responses": (json.dumps({"question": "q", "gold_answer": "1",
                                                       "generated_responses": "[" + "-" * 2 * 10**5 + "1]"}),
                                           "generated_responses"),
    "nested braces as responses": (json.dumps({"question": "q", "gold_answer": "1",
                                               "generated_responses": "{" * 150 + "}" * 150}),
                                   "generated_responses"),
}


@pytest.mark.parametrize("case", sorted(POOL_LINES))
def test_a_hostile_pool_line_is_a_400_naming_line_and_field(place: Place, case: str) -> None:
    line, field = POOL_LINES[case]
    upload = SimpleUploadedFile("hostile.jsonl", (line + "\n").encode())
    response = _client(place).post(f"/api/campaigns/{place.campaign.pk}/pools/", {"file": upload, "name": case})
    assert response.status_code == 400, (response.status_code, response.content[:300])
    rejected = response.json()["report"]["rejected"]
    assert rejected and rejected[0]["line"] == 1 and rejected[0]["field"].startswith(field), rejected
    assert not CandidatePool.objects.filter(name=case).exists()


def test_a_solution_with_a_score_past_a_double_is_a_rejected_line(place: Place) -> None:
    line = '{"problem": "What is 1+1?", "answer": "2", "solution": "It is 2.", "verifier_score": 1e400}\n'
    upload = SimpleUploadedFile("solutions.jsonl", line.encode())
    response = _client(place).post(f"/api/campaigns/{place.campaign.pk}/import-solutions/", {"file": upload})
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert "verifier_score" in response.content.decode()
    assert not Problem.objects.filter(campaign=place.campaign, text="What is 1+1?").exists()


@pytest.mark.parametrize("row, field", [({"solution_id": 10**30, "labels": [1]}, "solution_id"),
                                        ({"solution_id": 1, "labels": [1], "rollouts": 10**30}, "rollouts")])
def test_a_machine_label_id_past_64_bits_names_file_line_and_field(place: Place, tmp_path: Path, row: dict[str, Any],
                                                                   field: str) -> None:
    from annotate.services.importing import ImportFailed
    from annotate.services.machine_labels import import_machine_labels

    path = tmp_path / "labels.jsonl"
    row = {**row, "solution_id": place.solution_id} if row["solution_id"] == 1 else row
    path.write_text(json.dumps({"solution_id": place.solution_id, "labels": [1]}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ImportFailed) as failed:
        import_machine_labels(path, place.campaign, source="mc:test")
    first = failed.value.report.rejected[0]
    assert (first.file, first.line, first.field) == (str(path), 2, field), first

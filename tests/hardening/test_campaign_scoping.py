"""Pools and evaluations belong to one campaign: names are looked up inside it, and an evaluation reads only its
campaign's pool, scorings and reward models (the probe's calls, as it made them)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotate.models import Role
from rewards.jobs.models import CandidatePool, JobStatus, RewardModel, ScoringJob, TrainingJob
from rewards.jobs.services.comparisons import first_per_problem
from rewards.jobs.services.pools import free_pool_name, import_pool
from rewards.jobs.services.sampling import register_pool
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def _pool_file(tmp_path: Any, per_problem: int = 4) -> Any:
    path = tmp_path / "pool.jsonl"
    lines = [{"problem": f"What is {p}+{p}?", "solution": f"Step one.\n\nThe answer is {2 * p + c % 2}.",
              "answer": str(2 * p + c % 2), "ground_truth": str(2 * p)} for p in range(2) for c in range(per_problem)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/jsonl")


@pytest.fixture
def two(personas, campaign_factory, make_user):
    a = campaign_factory("demo", name="Demo")
    b = campaign_factory("b", name="B")
    people = personas(a, elsewhere=b)
    researcher_b = make_user("researcher_b")
    MembershipFactory(campaign=b, user=researcher_b, role=Role.RESEARCHER)
    return a, b, people, researcher_b


def _scoring(campaign: Any, pool: CandidatePool, kind: str = "prm") -> ScoringJob:
    job = TrainingJob.objects.create(kind=kind, campaign=campaign, dataset_path="/x.jsonl", status=JobStatus.SUCCEEDED)
    model = RewardModel.objects.create(job=job, kind=kind, campaign=campaign, name=f"{campaign.slug} {kind}",
                                       location="/m", base_model="default")
    return ScoringJob.objects.create(reward_model=model, pool=pool, status=JobStatus.SUCCEEDED,
                                     step_metrics={"step_auroc": 0.9})


def test_a_squatted_subset_name_in_another_campaign_is_not_used(two, tmp_path) -> None:
    a, b, _, researcher_b = two
    pool, _ = import_pool(_pool_file(tmp_path), "demo pool", campaign=a)
    client = Client()
    client.force_login(researcher_b)
    squat = f"{pool.name} · first 2 per problem"
    response = client.post(f"/api/campaigns/{b.pk}/pools/",
                           {"file": _upload("x.jsonl", _pool_file(tmp_path, 1).read_bytes()), "name": squat})
    assert response.status_code == 201, response.content
    subset = first_per_problem(pool, 2)
    assert subset.campaign == a and subset.pk != response.json()["id"] and subset.candidate_count == 4
    assert first_per_problem(pool, 2) == subset  # found again by what it was copied from, not by name


def test_pool_names_are_per_campaign_and_the_error_tells_nothing_of_others(two, tmp_path) -> None:
    a, b, people, researcher_b = two
    import_pool(_pool_file(tmp_path), "secret name", campaign=a)
    client = Client()
    client.force_login(researcher_b)
    content = _pool_file(tmp_path, 1).read_bytes()
    first = client.post(f"/api/campaigns/{b.pk}/pools/", {"file": _upload("x.jsonl", content), "name": "secret name"})
    assert first.status_code == 201  # a name another campaign uses says nothing about it
    again = client.post(f"/api/campaigns/{b.pk}/pools/", {"file": _upload("x.jsonl", content), "name": "secret name"})
    assert again.status_code == 400 and "this campaign already has" in again.json()["name"][0]
    assert CandidatePool.objects.filter(name="secret name").count() == 2


def test_a_squatted_sampling_pool_name_does_not_fail_the_job(two, tmp_path) -> None:
    from rewards.jobs.models import SamplingJob

    a, b, _, _ = two
    job = SamplingJob.objects.create(campaign=a, work_dir=str(tmp_path))
    import_pool(_pool_file(tmp_path), f"demo: sampling job {job.pk}", campaign=b)  # another campaign's squat
    import_pool(_pool_file(tmp_path), f"demo: sampling job {job.pk}", campaign=a)  # and one in its own
    (tmp_path / "samples.jsonl").write_text(_pool_file(tmp_path, 1).read_text())
    register_pool(job)
    job.refresh_from_db()
    assert job.pool is not None and job.pool.campaign == a and job.pool.name == f"demo: sampling job {job.pk} (2)"
    assert free_pool_name(a, "unused") == "unused"


@pytest.mark.parametrize("scored_by, pool_of", [("a", "a"), ("a", "b"), ("b", "a")])
def test_an_evaluation_reads_only_its_campaigns_scorings(two, tmp_path, scored_by, pool_of) -> None:
    """B's researcher names A's scoring job (A's model on A's pool, or on B's pool as the squat made it, or B's
    model on A's pool): the same 400 as for a job that does not exist, and nothing of A in the answer."""
    a, b, _, researcher_b = two
    campaigns = {"a": a, "b": b}
    pool, _ = import_pool(_pool_file(tmp_path), f"pool of {pool_of}", campaign=campaigns[pool_of])
    job = _scoring(campaigns[scored_by], pool)
    client = Client()
    client.force_login(researcher_b)
    response = client.post(f"/api/campaigns/{b.pk}/evaluations/", {"prm_scoring": job.pk},
                           content_type="application/json")
    missing = client.post(f"/api/campaigns/{b.pk}/evaluations/", {"prm_scoring": job.pk + 1000},
                          content_type="application/json")
    assert response.status_code == 400 and missing.status_code == 400
    assert response.json()["prm_scoring"][0].replace(str(job.pk), "N") == \
        missing.json()["prm_scoring"][0].replace(str(job.pk + 1000), "N")
    assert "step_auroc" not in response.content.decode()


def test_an_evaluation_of_its_own_campaign_still_runs(two, tmp_path) -> None:
    a, _, people, _ = two
    pool, _ = import_pool(_pool_file(tmp_path), "own", campaign=a)
    job = _scoring(a, pool)
    client = Client()
    client.force_login(people.researcher)
    response = client.post(f"/api/campaigns/{a.pk}/evaluations/", {"prm_scoring": job.pk},
                           content_type="application/json")
    assert response.status_code == 201 and response.json()["step_metrics"] == {"step_auroc": 0.9}


def test_the_service_refuses_a_foreign_model_whoever_calls_it(two, tmp_path) -> None:
    from rewards.jobs.services.evaluation import evaluate_pool
    from rewards.jobs.services.training import JobInputError

    a, b, _, _ = two
    pool, _ = import_pool(_pool_file(tmp_path), "p", campaign=b)
    with pytest.raises(JobInputError) as refused:
        evaluate_pool(pool, prm_scoring=_scoring(a, pool), campaign=b)
    assert refused.value.field == "pool"


@pytest.mark.parametrize("kind", ["prm", "orm"])
def test_the_dashboards_render_an_evaluation_of_one_model(two, tmp_path, kind) -> None:
    """One model and no other: the campaign's dashboard and /models/dashboard/ still answer (for everyone)."""
    from rewards.jobs.models import Candidate, CandidateScore
    from rewards.jobs.services.evaluation import evaluate_pool

    a, _, people, _ = two
    pool, _ = import_pool(_pool_file(tmp_path), "one model", campaign=a)
    job = _scoring(a, pool, kind)
    CandidateScore.objects.bulk_create(
        CandidateScore(scoring_job=job, candidate=candidate, score=0.9 if candidate.is_correct else 0.2)
        for candidate in Candidate.objects.filter(pool_problem__pool=pool))
    evaluate_pool(pool, **{f"{kind}_scoring": job}, campaign=a, trials=5)  # type: ignore[arg-type]
    for user in (people.researcher, people.staff):
        client = Client()
        client.force_login(user)
        for url in (f"/models/dashboard/{a.slug}/", "/models/dashboard/"):
            response = client.get(url)
            assert response.status_code == 200, (url, user)
            assert "dataset version: a file" in response.content.decode(), url

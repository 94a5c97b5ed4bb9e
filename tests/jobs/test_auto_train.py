"""The periodic task starts PRM + ORM jobs once a new dataset version has enough new labeled solutions."""
from __future__ import annotations

import pytest

from tests.factories import exported_version

pytestmark = pytest.mark.django_db


def test_auto_train_starts_prm_and_orm_once_per_version(graded_campaign, django_capture_on_commit_callbacks) -> None:
    from rewards.jobs.models import TrainingJob
    from rewards.jobs.services.training import auto_train, labeled_solutions

    first = exported_version(graded_campaign, number=1)
    rows = labeled_solutions(first)
    assert rows == first.files["trl-stepwise"]["rows"] > 50
    assert auto_train(min_new=rows + 1) == []  # not enough labeled solutions yet
    with django_capture_on_commit_callbacks() as callbacks:
        started = auto_train(min_new=rows)
    assert sorted(job.kind for job in started) == ["orm", "prm"] and len(callbacks) == 2
    assert all(job.auto_started and job.dataset_version == first and job.started_by is None for job in started)
    assert auto_train(min_new=1) == []  # once per version
    second = exported_version(graded_campaign, number=2)  # same labels: 0 new solutions
    assert auto_train(min_new=1) == []
    assert auto_train(min_new=0)[0].dataset_version == second
    assert TrainingJob.objects.filter(auto_started=True).count() == 4


def test_auto_train_keeps_to_the_campaigns_budget_says_why_and_can_be_turned_off(graded_campaign) -> None:
    from annotate.models import AutoTrain
    from annotate.services.campaigns import update_campaign
    from rewards.jobs.services.training import auto_train, labeled_solutions

    first = exported_version(graded_campaign, number=1)
    rows = labeled_solutions(first)
    update_campaign(campaign=graded_campaign, auto_train=AutoTrain.OFF)
    assert auto_train(min_new=0) == []  # off: nothing starts, however many new labels

    update_campaign(campaign=graded_campaign, auto_train=AutoTrain.ON, auto_train_max_steps=7)
    started = auto_train(min_new=0)
    assert len(started) == 2
    assert all(job.config["max_steps"] == 7 and job.total_steps == 7 for job in started)
    assert {job.started_how for job in started} == {f"automatic: {rows} new labeled solutions in v1"}

    second = exported_version(graded_campaign, number=2)
    (prm, _orm) = sorted(auto_train(min_new=0), key=lambda job: job.kind, reverse=True)
    assert prm.dataset_version == second
    assert prm.started_how == f"automatic: {labeled_solutions(second) - rows} new labeled solutions since v1"


def test_job_pages_say_who_started_a_job(client, graded_campaign, make_user) -> None:
    from django.urls import reverse

    from rewards.jobs.services.training import TrainingRequest, auto_train, start_training_job

    version = exported_version(graded_campaign, number=1)
    boss = make_user("boss", is_staff=True)
    by_hand = start_training_job(TrainingRequest(kind="prm", dataset_version=version, hyper={"max_steps": 3}),
                                 user=boss)
    automatic = auto_train(min_new=0)[0]
    client.force_login(boss)
    listing = client.get(reverse("jobs:index")).content.decode()
    assert "<td data-started-by>boss</td>" in listing
    assert "<td data-started-by>automatic: " in listing and " labeled solutions in v1</td>" in listing
    page = client.get(reverse("jobs:job", args=[automatic.pk])).content.decode()
    assert "started by <span data-started-by>automatic: " in page
    assert by_hand.started_how == "boss"

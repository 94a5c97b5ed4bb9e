"""The periodic task starts PRM + ORM jobs once a new dataset version has enough new labeled solutions."""
from __future__ import annotations

import pytest

from tests.factories import exported_version

pytestmark = pytest.mark.django_db


def test_auto_train_starts_prm_and_orm_once_per_version(graded_campaign, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
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

"""A queued job says what it waits for: the running jobs holding its queue's workers (another queue's never),
the jobs queued before it, or that its task has not reached the broker."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from steplab.jobs import JobStatus
from tests.factories import CampaignFactory, UserFactory

pytestmark = pytest.mark.django_db


def _import(campaign, user, *, sent: bool = True, **fields):
    from annotate.models import ImportJob
    from annotate.services.campaigns import create_import_job

    job = create_import_job(campaign, kind="problems", user=user,
                            upload=SimpleUploadedFile("p.jsonl", b'{"problem": "1+1?"}\n'))
    # recorded a minute ago: past the first seconds, in which every queued job with nothing ahead reads "starting"
    fields.setdefault("created_at", timezone.now() - timedelta(minutes=1))
    ImportJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now() if sent else None, **fields)
    job.refresh_from_db()
    return job


def test_a_queued_import_names_what_holds_its_queue(client, dataset_version) -> None:
    from rewards.jobs.models import TrainingJob
    from rewards.jobs.services.training import TrainingRequest, start_training_job

    campaign = CampaignFactory(slug="waits")
    boss = UserFactory(username="boss", is_staff=True)
    unsent = _import(campaign, boss, sent=False)
    assert unsent.waiting_for().words == "its task has not reached the broker yet; it is sent again within a minute"
    queued = _import(campaign, boss)
    assert queued.waiting_for().words.startswith("waiting for a worker on the default queue to take it")

    # A running training job holds the gpu queue's worker, not the default one's.
    training = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version,
                                                  hyper={"max_steps": 24}), user=boss)
    TrainingJob.objects.filter(pk=training.pk).update(status=JobStatus.RUNNING, step=2, dispatched_at=timezone.now())
    assert queued.waiting_for().blocking == []

    running = _import(campaign, boss, status=JobStatus.RUNNING, lines=3, total_lines=10)
    later = _import(campaign, boss)
    waiting = later.waiting_for()
    assert waiting.words == f"waiting behind import job {running.pk}, 3 of 10 lines and 1 queued job before it"
    assert waiting.links == [(f"See import job {running.pk}", reverse("manage:import", args=["waits", running.pk]))]
    client.force_login(boss)
    page = client.get(reverse("manage:import", args=["waits", later.pk])).content.decode()
    assert 'data-waiting-for="default"' in page and f"waiting behind import job {running.pk}" in page
    assert running.waiting_for() is None  # a running job waits for nothing

    behind = start_training_job(TrainingRequest(kind="orm", dataset_version=dataset_version,
                                                hyper={"max_steps": 24}), user=boss)
    TrainingJob.objects.filter(pk=behind.pk).update(dispatched_at=timezone.now())
    behind.refresh_from_db()
    assert behind.waiting_for().words == f"waiting behind training job {training.pk}, 2 of 24 steps"
    listing = client.get(reverse("jobs:index")).content.decode()
    row = listing.split(f'<tr data-job="{behind.pk}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-waiting-for="gpu"' in row
    page = reverse("jobs:job", args=[training.pk])
    assert f'href="{page}" data-blocking-job>Cancel training job {training.pk}' in row

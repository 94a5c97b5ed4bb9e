"""Training-class work has a worker process of its own: an import never waits behind a training job, and a job
queued behind one says so (and where to cancel it)."""
from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.conftest import FAST_HYPER
from tests.factories import UserFactory

pytestmark = [pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]


def test_an_import_completes_while_a_training_job_runs(client, celery_worker_process, dataset_version,
                                                       wait_for) -> None:
    from annotate.models import ImportJob
    from annotate.services.campaigns import create_import_job
    from rewards.jobs.models import JobStatus, TrainingJob
    from rewards.jobs.services.training import TrainingRequest, request_cancel, start_training_job

    boss = UserFactory(username="boss", is_staff=True)
    # Long (5,000 steps) but cheap while it lasts: it is cancelled as soon as the import is done.
    long = {**FAST_HYPER, "max_steps": 5000, "batch_size": 1, "max_length": 32}
    training = start_training_job(TrainingRequest(kind="prm", dataset_version=dataset_version, hyper=long),
                                  user=boss)
    wait_for(lambda: TrainingJob.objects.get(pk=training.pk).status == JobStatus.RUNNING, timeout=120,
             what="the training job to start")
    behind = start_training_job(TrainingRequest(kind="orm", dataset_version=dataset_version, hyper=long),
                                user=boss)
    try:
        rows = [{"problem": f"What is {n}+{n}?", "answer": str(2 * n)} for n in range(20)]
        upload = SimpleUploadedFile("problems.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
        job = create_import_job(dataset_version.campaign, kind="problems", upload=upload, user=boss)
        done = wait_for(lambda: (j := ImportJob.objects.get(pk=job.pk)).is_finished and j, timeout=120,
                        what="the import to finish while the training job runs")
        assert done.status == JobStatus.SUCCEEDED, done.error
        assert done.imported == 20
        assert TrainingJob.objects.get(pk=training.pk).status == JobStatus.RUNNING

        # The second training job waits for the one training worker: its page names the job it waits behind.
        client.force_login(boss)
        page = client.get(reverse("jobs:job", args=[behind.pk])).content.decode()
        assert TrainingJob.objects.get(pk=behind.pk).status == JobStatus.QUEUED
        assert 'data-waiting-for="gpu"' in page
        assert f"waiting behind training job {training.pk}, " in page and " of 5000 steps" in page
        assert f'href="{reverse("jobs:job", args=[training.pk])}" data-blocking-job>Cancel training job' in page
    finally:
        for job_ in (behind, training):
            request_cancel(TrainingJob.objects.get(pk=job_.pk))
    wait_for(lambda: TrainingJob.objects.get(pk=training.pk).status == JobStatus.CANCELLED, timeout=60,
             what="the training job to be cancelled")

"""The first seconds of a queued job read "starting", not "is a worker serving the … queue?": a worker takes a
job within a moment, and the question is worth asking only once one has not."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from steplab.jobs import STARTING_GRACE_S
from tests.factories import CampaignFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_job_just_queued_says_starting_and_asks_about_workers_only_later(client) -> None:
    from annotate.models import ImportJob
    from annotate.services.campaigns import create_import_job

    campaign = CampaignFactory(slug="fresh")
    boss = UserFactory(username="fresh-boss", is_staff=True)
    job = create_import_job(campaign, kind="problems", user=boss,
                            upload=SimpleUploadedFile("p.jsonl", b'{"problem": "1+1?"}\n'))
    ImportJob.objects.filter(pk=job.pk).update(dispatched_at=timezone.now())
    client.force_login(boss)
    page = client.get(reverse("manage:import", args=["fresh", job.pk])).content.decode()
    assert 'data-waiting-for="default"' in page
    assert "Queued: starting: a worker on the default queue takes it in a moment." in page
    assert "is a worker serving" not in page

    # Not yet sent to the broker in its first seconds (the commit's hook is on its way): still starting.
    ImportJob.objects.filter(pk=job.pk).update(dispatched_at=None)
    job.refresh_from_db()
    assert job.waiting_for().words.startswith("starting")

    past = timezone.now() - timedelta(seconds=STARTING_GRACE_S + 1)
    ImportJob.objects.filter(pk=job.pk).update(created_at=past, dispatched_at=past)
    page = client.get(reverse("manage:import", args=["fresh", job.pk])).content.decode()
    assert "is a worker serving the default queue?" in page and "starting" not in page

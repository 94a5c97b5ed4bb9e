"""A new kind of job is one declaration: a kind registered here, with its own model, start service, launch
hooks, page and API route, is dispatched, watched to success (its follow-up called), shown on the work pages,
served by the jobs API and reaped — by the runner, tasks, views and API as they are, none of them edited.

The kind's model is made for the test (its table created inside the test's transaction, gone with its rollback);
its process is a real local subprocess. Celery runs its task eagerly in this process: the test's kind exists
only here, not in the session's worker.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, models
from django.urls import clear_url_caches, reverse
from django.utils import timezone
from rest_framework import serializers

from annotate.models import Campaign
from annotate.permissions import can_manage
from rewards.jobs.api.base import CampaignJobsView, CampaignRowOut
from rewards.jobs.backends import Launch
from rewards.jobs.kinds import registry
from rewards.jobs.models import JobStatus, LaunchedJob
from rewards.jobs.services import runner
from steplab import jobs
from steplab.celery import app as celery_app
from tests.factories import CampaignFactory

pytestmark = pytest.mark.django_db

ECHOED = "echo.txt"


def _reload_urls() -> None:
    """The URL confs read the registry when imported: read it again."""
    for name in ("rewards.jobs.urls", "steplab.api_urls", "steplab.urls"):
        importlib.reload(importlib.import_module(name))
    clear_url_caches()


@dataclass
class Echo:
    model: Any
    kind: registry.JobKind
    followed: list[int]


@pytest.fixture
def echo_kind(settings: Any, tmp_path: Path) -> Iterator[Echo]:
    settings.STEPLAB_JOB_POLL_INTERVAL_S = 0.05

    class EchoJob(LaunchedJob):
        """A job whose process writes its text to a file; on success the text is stored on the row."""

        task_name = "tests.echo_job"
        campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
        text = models.TextField()
        echoed = models.TextField(blank=True)

        class Meta(LaunchedJob.Meta):
            app_label = "jobs"

    class EchoOut(CampaignRowOut):
        class Meta:
            model = EchoJob
            fields = ("id", "campaign", "status", "text", "echoed")

    class StartEcho(serializers.Serializer):
        text = serializers.CharField()

    def start_echo(*, campaign: Campaign, text: str, user: Any) -> EchoJob:
        job = EchoJob.objects.create(campaign=campaign, text=text, started_by=user, work_dir="")
        jobs.dispatch_on_commit(job)
        return job

    class EchoJobsView(CampaignJobsView):
        job_output = EchoOut
        start_input = StartEcho
        about = "Echo jobs."
        about_start = "Start one."

        def may_start(self, user: Any, campaign: Campaign) -> bool:
            return can_manage(user, campaign)

        def start_job(self, campaign: Campaign, values: dict[str, Any]) -> LaunchedJob:
            return start_echo(campaign=campaign, text=values["text"], user=self.request.user)

    def hooks(job: Any) -> runner.JobHooks:
        work = tmp_path / str(job.pk)
        launch = Launch(name=f"echo-{job.pk}", work_dir=work, commands=[
            [sys.executable, "-c", f"open({str(work / ECHOED)!r}, 'w').write({job.text!r})"]])

        def store() -> None:
            EchoJob.objects.filter(pk=job.pk).update(echoed=(work / ECHOED).read_text())

        return runner.JobHooks(launch=launch, progress=dict, on_success=store)

    def run(job_id: int) -> str | None:
        job = runner.claim(EchoJob, job_id)
        return None if job is None else runner.watch(job, hooks(job))

    followed: list[int] = []
    with connection.schema_editor() as editor:
        editor.create_model(EchoJob)
    kind = registry.register(registry.JobKind(
        name="echo", model=EchoJob, start=start_echo, run=run, hooks=hooks, after=(followed.append,),
        page="echo", title="Echo", related=("campaign",),
        routes=(("campaigns/{campaign}/echo/", EchoJobsView, "echo"),)))
    _reload_urls()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        yield Echo(model=EchoJob, kind=kind, followed=followed)
    finally:
        celery_app.conf.task_always_eager = eager
        registry.unregister("echo")
        celery_app.tasks.unregister(EchoJob.task_name)
        del apps.all_models["jobs"]["echojob"]
        apps.clear_cache()
        _reload_urls()


def test_a_kind_registered_here_is_started_run_shown_and_reaped(echo_kind: Echo, personas: Any, client: Any,
                                                               settings: Any) -> None:
    from rewards.jobs.tasks import reap_stale_jobs

    people = personas(CampaignFactory(slug="echoes"))
    campaign = people.campaign
    client.force_login(people.owner)
    started = client.post(reverse("api:echo", args=[campaign.pk]), {"text": "hello"}, content_type="application/json")
    assert started.status_code == 201, started.content
    job_id = started.json()["id"]
    listed = client.get(reverse("api:echo", args=[campaign.pk])).json()["results"]
    assert [row["id"] for row in listed] == [job_id]

    # Its task was to be sent on commit; the test's transaction never commits, so the runner's periodic
    # dispatcher sends it (the broker is bypassed: Celery runs it eagerly here).
    assert runner.dispatch_undispatched(older_than=timedelta(0)) == {"EchoJob": [job_id]}
    job = echo_kind.model.objects.get(pk=job_id)
    assert (job.status, job.echoed, job.progress) == (JobStatus.SUCCEEDED, "hello", 1.0), job.error
    assert echo_kind.followed == [job_id]
    assert client.get(reverse("api:echo", args=[campaign.pk])).json()["results"][0]["echoed"] == "hello"

    page = client.get(reverse("jobs:echo_job", args=[job_id]))
    assert page.status_code == 200
    assert f"Echo job {job_id}" in page.content.decode()
    assert client.get(reverse("jobs:echo_job_progress", args=[job_id])).status_code == 200
    client.force_login(people.outsider)
    assert client.get(reverse("jobs:echo_job", args=[job_id])).status_code == 404
    assert client.get(reverse("api:echo", args=[campaign.pk])).status_code == 404

    stale = timezone.now() - timedelta(hours=1)
    lost = echo_kind.model.objects.create(campaign=campaign, text="lost", status=JobStatus.RUNNING,
                                          heartbeat_at=stale, started_at=stale,
                                          attempts=settings.STEPLAB_JOB_MAX_ATTEMPTS)
    assert reap_stale_jobs()["echo"] == [lost.pk]
    lost.refresh_from_db()
    assert lost.status == JobStatus.FAILED and "no heartbeat" in lost.error

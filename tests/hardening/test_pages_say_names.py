"""What pages and answers show: names, never this server's folders; a refusal that is a styled page for a browser
and one log line for the console; the API docs under the site's CSP."""
from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from annotate.models import Role
from rewards.jobs.models import CandidatePool, JobStatus, RewardModel, TrainingJob
from steplab.logfilters import RefusalsInOneLine
from steplab.middleware import CONTENT_SECURITY_POLICY
from tests.factories import DatasetVersionFactory, MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def var(settings, tmp_path: Path) -> Path:
    root = tmp_path / "srv" / "steplab" / "var"
    settings.VAR_DIR = root
    settings.STEPLAB_JOBS_ROOT = root / "jobs"
    settings.STEPLAB_MODELS_DIR = root / "models"
    settings.MEDIA_ROOT = str(root / "media")
    return root


def test_job_pages_api_and_location_columns_show_names_not_server_paths(var: Path, personas,
                                                                         campaign_factory) -> None:
    campaign = campaign_factory("paths", name="Paths")
    people = personas(campaign)
    dataset = var / "media" / "datasets" / "paths" / "v1" / "prm800k.jsonl"
    job = TrainingJob.objects.create(
        kind="prm", campaign=campaign, dataset_path=str(dataset), status=JobStatus.SUCCEEDED,
        work_dir=str(var / "jobs" / "train-1"), output_dir=str(var / "jobs" / "train-1" / "model"),
        config={"dataset": str(dataset), "output_dir": str(var / "jobs" / "train-1" / "model")},
        error=f"the process exited with status 1\n--- stderr (tail) ---\nerror: cannot read {dataset}",
        log_tail=f"reading {dataset}\n")
    RewardModel.objects.create(job=job, kind="prm", campaign=campaign, name="prm-1", base_model="default",
                               location=str(var / "models" / "prm-1"))
    CandidatePool.objects.create(name="old pool", campaign=campaign, source=str(var / "jobs" / "uploads" / "tmpx"
                                                                               / "pool.jsonl"))
    client = Client()
    client.force_login(people.researcher)
    answers = {url: client.get(url) for url in ("/api/jobs/", f"/api/jobs/{job.pk}/", "/models/",
                                                f"/models/jobs/{job.pk}/", f"/models/jobs/{job.pk}/progress/",
                                                f"/models/dashboard/{campaign.slug}/",
                                                f"/api/campaigns/{campaign.pk}/pools/")}
    for url, response in answers.items():
        assert response.status_code == 200, url
        body = response.content.decode()
        assert str(var) not in body and "/srv/steplab" not in body, url
    assert "prm-1" in answers["/models/"].content.decode()  # the Location column: the model's folder name
    assert "datasets/paths/v1/prm800k.jsonl" in answers[f"/api/jobs/{job.pk}/"].content.decode()
    assert "uploads/tmpx/pool.jsonl" in answers[f"/api/campaigns/{campaign.pk}/pools/"].content.decode()


def test_a_pool_records_its_file_name_not_where_it_was(var: Path, campaign_factory, tmp_path: Path) -> None:
    from rewards.jobs.services.pools import import_pool

    path = tmp_path / "somewhere" / "pool.jsonl"
    path.parent.mkdir()
    path.write_text('{"problem": "1+1?", "solution": "It is 2.", "answer": "2", "ground_truth": "2"}\n')
    pool, _ = import_pool(path, "named", campaign=campaign_factory("named", name="Named"))
    assert pool.source == "pool.jsonl"


def test_a_browser_refused_on_a_dataset_file_gets_the_sites_403_page(personas, campaign_factory) -> None:
    campaign = campaign_factory("files", name="Files")
    people = personas(campaign)
    version = DatasetVersionFactory(campaign=campaign)
    client = Client()
    client.force_login(people.labeler)
    url = f"/api/datasets/{version.pk}/files/prm800k/"
    page = client.get(url, HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    html = page.content.decode()
    assert page.status_code == 403 and 'data-error-page="403"' in html and "data-back" in html
    assert "Labelers cannot read or download datasets" in html and "<nav" in html
    api = client.get(url, HTTP_ACCEPT="application/json")  # an API client still gets JSON
    assert api.status_code == 403 and api.json()["detail"].startswith("Labelers cannot")


def test_a_refusal_is_logged_in_one_line(make_user, campaign_factory) -> None:
    campaign = campaign_factory("quiet", name="Quiet")
    labeler = make_user("quiet_labeler")
    MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER)
    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, RefusalsInOneLine) for f in h.filters)]
    assert handlers, "the console handler carries the filter"
    handler: Any = handlers[0]
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        client = Client()
        client.force_login(labeler)
        assert client.get(f"/manage/c/{campaign.slug}/").status_code == 403
    finally:
        handler.setStream(previous)
    output = stream.getvalue()
    assert "Forbidden" in output and "Traceback" not in output and len(output.strip().splitlines()) == 1, output


def test_the_api_docs_carry_the_sites_csp_and_load_only_local_scripts(make_user) -> None:
    client = Client()
    page = client.get("/api/docs/")
    assert page.status_code == 200 and page["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    html = page.content.decode()
    assert "<script>" not in html and "?script=" in html  # the start-up script is a file of its own
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()

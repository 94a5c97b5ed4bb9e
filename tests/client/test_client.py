"""steplab_client against the live test server (a real HTTP server on the test database) with real API tokens:
download and verify dataset files, load them into ``datasets``, lease and submit whole solutions, start and wait
for a job."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from annotate.models import Assignment, AssignmentStatus, Membership, Rating, Role
from api.services import create_token
from rewards.jobs.models import RewardModel
from rewards.jobs.services.training import dataset_file
from rewards.services.datasets import create_dataset_version
from steplab_client import ChecksumMismatch, Steplab, SteplabError
from tests.conftest import FAST_HYPER
from tests.datasets.conftest import math500_campaign, storage_dirs  # noqa: F401  (fixtures)
from tests.factories import numbered_solution

pytestmark = pytest.mark.django_db(transaction=True)


def _client(live_server, user, scope: str = "write") -> Steplab:
    _, raw = create_token(user, name="client", scope=scope)
    return Steplab(live_server.url, raw, timeout=30)


@pytest.fixture
def researcher_lab(live_server, math500_campaign, storage_dirs, make_user, settings, tmp_path):  # noqa: F811
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    version = create_dataset_version(math500_campaign)
    assert version is not None
    researcher = make_user("researcher")
    Membership.objects.create(campaign=math500_campaign, user=researcher, role=Role.RESEARCHER)
    return _client(live_server, researcher), version


def test_versions_download_with_their_sha256_and_load_into_datasets(researcher_lab, tmp_path: Path) -> None:
    lab, version = researcher_lab
    listed = lab.dataset_versions(campaign=version.campaign_id)
    assert [v.id for v in listed] == [version.pk] and listed[0].content_sha256 == version.content_sha256
    path = lab.download(listed[0], "prm800k", tmp_path)
    assert path.read_bytes() == default_storage.open(version.files["prm800k"]["name"]).read()
    stepwise = lab.load_dataset(version.pk, "trl-stepwise", cache_dir=tmp_path / "cache")
    assert stepwise.num_rows == version.files["trl-stepwise"]["rows"] > 0
    assert {"prompt", "completions", "labels"} <= set(stepwise.column_names)
    as_parquet = lab.load_dataset(listed[0], "trl-stepwise-parquet", cache_dir=tmp_path / "cache")
    assert as_parquet.num_rows == stepwise.num_rows and as_parquet[0]["labels"] == stepwise[0]["labels"]
    # A file whose bytes are not the recorded ones is refused and not kept.
    stored = Path(default_storage.path(version.files["outcome"]["name"]))
    original = stored.read_bytes()
    stored.write_bytes(original.replace(b"true", b"fals", 1) if b"true" in original else b" " + original[1:])
    with pytest.raises(ChecksumMismatch, match="SHA-256"):
        lab.download(listed[0], "outcome", tmp_path)
    assert not list(tmp_path.glob("outcome*"))
    with pytest.raises(KeyError, match="has no 'nonsense' file"):
        lab.download(listed[0], "nonsense", tmp_path)


def test_lease_and_submit_whole_solutions(live_server, campaign_factory, make_user) -> None:
    campaign = campaign_factory("client-lab")
    for _ in range(3):
        numbered_solution(campaign, 3)
    labeler = make_user("program")
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    lab = _client(live_server, labeler)
    lease = lab.lease(campaign.pk)
    assert lease is not None and len(lease.steps) == 3 and lease.steps[0].startswith("Step 1 of solution")
    with pytest.raises(SteplabError) as refused:
        lab.submit_labels(lease.assignment, [1, -1, 1])
    assert refused.value.status == 400 and refused.value.field == "ratings[2]"
    done = lab.submit_labels(lease.assignment, [1, -1], client_key="run-1")
    again = lab.submit_labels(lease.assignment, [1, -1], client_key="run-1")
    assert (done["finish_reason"], done["replayed"], again["replayed"]) == ("found_error", False, True)
    assert Rating.objects.filter(assignment_id=lease.assignment).count() == 2
    second = lab.lease(campaign.pk)
    assert second is not None and second.assignment != lease.assignment
    results = lab.submit_many([(second.assignment, [1, 1, 1])])
    assert [(r["status"], r["labeling"]["finish_reason"]) for r in results] == [(200, "solution")]
    assert Assignment.objects.get(pk=second.assignment).status == AssignmentStatus.SUBMITTED
    read_only = _client(live_server, labeler, scope="read")
    with pytest.raises(SteplabError) as forbidden:
        read_only.lease(campaign.pk)
    assert forbidden.value.status == 403


def test_start_and_wait_for_a_job(researcher_lab) -> None:
    """A job not finished within the wait's timeout raises ``TimeoutError`` saying where it stands; once
    cancelled, the wait returns it. (A job the session's worker, if one runs, has taken is running.)"""
    lab, version = researcher_lab
    job = lab.start_training(kind="prm", dataset_version=version.pk, hyper={"max_steps": 5000})
    assert (job["status"], job["dataset_version"]) == ("queued", version.pk)
    with pytest.raises(TimeoutError, match="still (queued|running)"):
        lab.wait_for_job(job["id"], timeout=0.5, poll_s=0.1)
    lab.cancel_job(job["id"])
    assert lab.wait_for_job(job["id"], timeout=60, poll_s=0.1)["status"] == "cancelled"
    with pytest.raises(SteplabError) as bad:
        lab.start_training(kind="crm", dataset_version=version.pk)
    assert bad.value.status == 400 and "kind" in bad.value.body


@pytest.mark.worker
@pytest.mark.training
def test_wait_returns_a_real_job_finished_or_failed(celery_worker_process, researcher_lab) -> None:
    """A real training job (CPU MiniLM, three steps) through the job machinery and the real Celery worker: the
    wait returns it succeeded, with its metrics and its registered model. A job whose data the trainer refuses is
    returned failed (as the wait documents: it does not raise), with the trainer's own words."""
    lab, version = researcher_lab
    started = lab.start_training(kind="prm", dataset_version=version.pk, hyper=FAST_HYPER)
    done = lab.wait_for_job(started["id"], timeout=600, poll_s=0.5)
    assert done["status"] == "succeeded", done["error"]
    assert (done["id"], done["step"], done["total_steps"], done["progress"]) == (started["id"], 3, 3, 1.0)
    assert done["metrics"]["train"]["steps"] == 3 and done["finished_at"] is not None
    assert RewardModel.objects.get(job_id=done["id"]).pk == done["reward_model"]

    # The very file the trainer reads for this version, with one row's labels cut short.
    data = dataset_file(version, "prm")
    row = json.loads(data.read_text(encoding="utf-8").splitlines()[0])
    assert len(row["completions"]) > 1
    data.write_text(json.dumps(row) + "\n" + json.dumps({**row, "labels": row["labels"][:1]}) + "\n",
                    encoding="utf-8")
    refused = lab.start_training(kind="prm", dataset_version=version.pk, hyper=FAST_HYPER)
    failed = lab.wait_for_job(refused["id"], timeout=600, poll_s=0.5)
    assert failed["status"] == "failed" and failed["finished_at"] is not None
    assert "line 2: field 'labels'" in failed["error"], failed["error"]
    assert failed["reward_model"] is None

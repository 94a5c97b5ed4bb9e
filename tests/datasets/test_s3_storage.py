"""Dataset versions in an S3-compatible store: written, listed, downloaded whole and by range, trained on.

S3 itself cannot be reached here, so moto's server (``python -m moto.server``) stands in for it: a separate
process that speaks the S3 REST API over HTTP on a loopback port, as MinIO would. Nothing of ours is mocked:
the settings' own ``s3_storage`` builds django-storages' S3Storage, whose boto3 client talks HTTP to it.
"""
from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from annotate.models import Membership, Role
from annotate.permissions import SYSTEM
from rewards.jobs.models import Kind
from rewards.jobs.services.training import TrainingRequest, dataset_file, labeled_solutions, start_training_job
from rewards.models import DatasetVersion
from rewards.services.datasets import DatasetStorageError, create_dataset_version
from rewards.training.data import read_dataset
from steplab.settings import s3_storage

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server as a subprocess on a free loopback port; its URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
            break
        except urllib.error.HTTPError:
            break  # it answered
        except OSError:
            assert server.poll() is None and time.time() < deadline, log_path.read_text()
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(timeout=20)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials (moto accepts any) and no shared AWS files or instance metadata: boto3 reads nothing
    from this machine and asks nothing of any other."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "steplab-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "steplab-test")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def _use_s3(settings: Any, bucket: str, endpoint: str) -> None:
    """The default storage as ``STEPLAB_S3_*`` would make it (Django rebuilds default_storage on the change)."""
    storage = s3_storage({"STEPLAB_S3_BUCKET": bucket, "STEPLAB_S3_ENDPOINT_URL": endpoint,
                          "STEPLAB_S3_REGION": REGION})
    assert storage is not None
    settings.STORAGES = {**settings.STORAGES, "default": storage}


@pytest.fixture
def s3(settings, storage_dirs, aws_env, s3_endpoint, tmp_path):
    """A fresh bucket on the S3 server as the default storage; (boto3 client, bucket name)."""
    bucket = f"steplab-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION)
    client.create_bucket(Bucket=bucket)
    _use_s3(settings, bucket, s3_endpoint)
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    return client, bucket


def _objects(client: Any, bucket: str, prefix: str = "") -> dict[str, int]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return {item["Key"]: item["Size"] for item in listed.get("Contents", [])}


def _get(client: Any, bucket: str, key: str) -> bytes:
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_version_is_written_to_the_bucket_as_recorded(math500_campaign, s3, storage_dirs) -> None:
    client, bucket = s3
    version = create_dataset_version(math500_campaign)
    assert version is not None and version.status == DatasetVersion.Status.READY
    stored = _objects(client, bucket)
    assert stored == {info["name"]: info["bytes"] for info in version.files.values()}
    assert all(name.startswith(f"{version.folder}/") for name in stored)
    for fmt, info in version.files.items():
        assert hashlib.sha256(_get(client, bucket, info["name"])).hexdigest() == info["sha256"], fmt
    assert not storage_dirs["media"].exists(), "nothing went to the local media folder"
    assert not any(storage_dirs["tmp"].iterdir()), "the temporary export folder is cleaned up"
    assert create_dataset_version(math500_campaign) is None, "unchanged labels: no second version"


def test_the_download_api_serves_the_bucket_bytes_whole_and_by_ranged_gets(math500_campaign, s3, make_user) -> None:
    client, bucket = s3
    version = create_dataset_version(math500_campaign)
    assert version is not None
    researcher = make_user("researcher")
    Membership.objects.create(campaign=math500_campaign, user=researcher, role=Role.RESEARCHER)
    api = APIClient()
    api.force_login(researcher)
    ranges: list[bytes | None] = []  # the Range header of every GetObject the storage's client sends
    default_storage.connection.meta.client.meta.events.register(
        "before-send.s3.GetObject", lambda request, **_: ranges.append(request.headers.get("Range")))

    info = version.files["trl-stepwise-parquet"]
    data = _get(client, bucket, info["name"])
    url = f"/api/datasets/{version.pk}/files/trl-stepwise-parquet/"
    whole = api.get(url)
    assert whole.status_code == 200 and b"".join(whole.streaming_content) == data
    assert hashlib.sha256(data).hexdigest() == info["sha256"] == whole["X-Content-SHA256"]
    assert int(whole["Content-Length"]) == len(data) == info["bytes"]
    part = api.get(url, HTTP_RANGE="bytes=10-99")
    assert part.status_code == 206 and b"".join(part.streaming_content) == data[10:100]
    assert part["Content-Range"] == f"bytes 10-99/{len(data)}"
    tail = api.get(url, HTTP_RANGE="bytes=-16")
    assert tail.status_code == 206 and b"".join(tail.streaming_content) == data[-16:]
    last = len(data) - 1
    # one GET per download, each for exactly its bytes: no whole-object buffering in the web process
    assert ranges == [f"bytes=0-{last}".encode(), b"bytes=10-99", f"bytes={len(data) - 16}-{last}".encode()]
    assert api.get(url, HTTP_RANGE=f"bytes={len(data)}-").status_code == 416


@pytest.mark.training
def test_a_training_job_on_an_s3_version_gets_a_verified_local_copy_and_trains(math500_campaign, s3,
                                                                                settings) -> None:
    client, bucket = s3
    version = create_dataset_version(math500_campaign)
    assert version is not None
    job = start_training_job(TrainingRequest(kind=Kind.PRM, dataset_version=version,
                                             hyper={"max_steps": 2, "batch_size": 4, "max_length": 128}), user=SYSTEM)
    path = Path(job.dataset_path)
    info = version.files["trl-stepwise"]
    assert path == settings.STEPLAB_JOBS_ROOT / "datasets" / info["sha256"] / "trl-stepwise.jsonl"
    assert path.read_bytes() == _get(client, bucket, info["name"])
    assert len(read_dataset(path, "prm")) == info["rows"] == 24
    assert dataset_file(version, Kind.PRM) == path, "the copy is reused"
    orm = dataset_file(version, Kind.ORM)
    assert hashlib.sha256(orm.read_bytes()).hexdigest() == version.files["outcome"]["sha256"]
    assert len(read_dataset(orm, "orm")) == 24
    without_counts = {fmt: {k: v for k, v in file.items() if k != "rows"} for fmt, file in version.files.items()}
    assert labeled_solutions(DatasetVersion(campaign=math500_campaign, files=without_counts)) == 24

    # the trainer itself, on the job file the job records (2 CPU steps of the default MiniLM)
    run = subprocess.run([sys.executable, "-m", "rewards.training", "train", "--config",
                          str(Path(job.work_dir) / "job.json")], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads((Path(job.work_dir) / "job.json").read_text())["dataset"] == str(path)
    assert (Path(job.output_dir) / "events.jsonl").is_file()


def _snapshot_fails(campaign, storage_dirs: dict[str, Path], cause: str) -> None:
    """The snapshot names the file and the storage's cause, registers no version and leaves no temporary file."""
    with pytest.raises(DatasetStorageError, match=r"could not write datasets/lab/\S+ to the dataset storage: " + cause):
        create_dataset_version(campaign)
    assert not DatasetVersion.objects.exists()
    assert not any(storage_dirs["tmp"].iterdir())


def test_a_missing_bucket_fails_clearly_registers_nothing_and_a_rerun_succeeds(math500_campaign, s3, settings,
                                                                              storage_dirs, s3_endpoint) -> None:
    client, _ = s3
    missing = f"steplab-missing-{uuid.uuid4().hex[:8]}"
    _use_s3(settings, missing, s3_endpoint)
    _snapshot_fails(math500_campaign, storage_dirs, ".*NoSuchBucket")

    client.create_bucket(Bucket=missing)
    version = create_dataset_version(math500_campaign)
    assert version is not None and version.number == 1
    assert _objects(client, missing) == {info["name"]: info["bytes"] for info in version.files.values()}


def test_an_unreachable_endpoint_fails_clearly_on_write_and_on_read(math500_campaign, s3, settings, storage_dirs,
                                                                   s3_endpoint, monkeypatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # fail at once rather than after boto3's retries
    _, bucket = s3
    down = f"http://127.0.0.1:{_free_port()}"  # nothing listens there: the endpoint is down
    _use_s3(settings, bucket, down)
    _snapshot_fails(math500_campaign, storage_dirs, "Could not connect to the endpoint URL")

    _use_s3(settings, bucket, s3_endpoint)
    version = create_dataset_version(math500_campaign)
    assert version is not None
    _use_s3(settings, bucket, down)
    with pytest.raises(DatasetStorageError, match=r"could not read datasets/lab/\S+/trl-stepwise.jsonl from the "
                                                  r"dataset storage: Could not connect to the endpoint URL"):
        dataset_file(version, Kind.PRM)
    assert not [p for p in (settings.STEPLAB_JOBS_ROOT / "datasets").rglob("*") if p.is_file()], "no partial copy"


def test_a_copy_whose_bytes_differ_from_the_recorded_hash_is_refused(math500_campaign, s3, settings) -> None:
    client, bucket = s3
    version = create_dataset_version(math500_campaign)
    assert version is not None
    name = version.file_name("outcome")
    client.put_object(Bucket=bucket, Key=name, Body=_get(client, bucket, name).replace(b"true", b"fals"))
    with pytest.raises(DatasetStorageError, match=f"{name} in the dataset storage has SHA-256 [0-9a-f]{{64}}, but "
                                                  f"lab v1 recorded {version.files['outcome']['sha256']}"):
        dataset_file(version, Kind.ORM)
    assert not [p for p in (settings.STEPLAB_JOBS_ROOT / "datasets").rglob("*") if p.is_file()]

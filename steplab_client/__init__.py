"""A small typed Python client for Steplab's REST API (``/api/``), on ``requests``.

    from steplab_client import Steplab
    lab = Steplab("https://steplab.example.org", token="stp_…")
    print(lab.campaigns())                                     # Campaign(id=3, slug='demo', …)
    version = lab.dataset_versions(campaign=3)[-1]
    train = lab.load_dataset(version, "trl-stepwise")          # a datasets.Dataset, SHA-256 checked
    lease = lab.lease(campaign=3)
    lab.submit_labels(lease.assignment, [1, 1, 0, -1])         # one request: rated, finished
    job = lab.wait_for_job(lab.start_training(kind="prm", dataset_version=version.id)["id"])
"""
from .client import (
    Campaign,
    ChecksumMismatch,
    DatasetFile,
    DatasetVersion,
    Lease,
    Steplab,
    SteplabError,
)

__all__ = ["Campaign", "ChecksumMismatch", "DatasetFile", "DatasetVersion", "Lease", "Steplab", "SteplabError"]

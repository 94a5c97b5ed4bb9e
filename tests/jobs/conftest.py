"""Fixtures for reward-model jobs: a real campaign imported from PRM800K, exported into a dataset version.

Data: the PRM800K phase-1 test trajectories (101 problems, real human step ratings), imported with the
project's own importer and exported with ``rewards.exports.export_campaign`` into Django's default
storage, as the dataset-version builder does. The reconstructed rows carry no grader verdict, so a
solution's ``is_correct`` (needed by the outcome format) is set from the labeler's finish reason
("solution": every step through the answer rated acceptable), as tests/training does. Phase-1
trajectories carry no −1 step (negatives are only among the alternatives), so the 10 genuine phase-2
rows are imported too; export seed 3 with a 30 % test split puts 2 of their −1 steps in the test split.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PRM800K_TEST = "prm800k/phase1_test_reconstructed.jsonl"
PRM800K_GENUINE = "prm800k/genuine_rows.jsonl"
FAST_HYPER = {"max_steps": 3, "batch_size": 4, "max_length": 128, "logging_steps": 1}


def make_version(campaign: Any, *, test_fraction: float = 0.3, seed: int = 3, number: int = 1) -> Any:
    """Export a campaign's labels into storage and record a ready DatasetVersion for them."""
    from django.core.files.storage import default_storage

    from rewards.exports import ExportOptions, export_campaign
    from rewards.models import DatasetVersion

    folder = f"test-jobs/{campaign.slug}-{uuid.uuid4().hex[:8]}/v{number}"
    files = {}
    for fmt in ("trl-stepwise", "outcome"):
        name = f"{folder}/{fmt}.jsonl"
        written = export_campaign(campaign, fmt, Path(default_storage.path(name)),
                                  ExportOptions(seed=seed, test_fraction=test_fraction))
        files[fmt] = {"name": name, "sha256": written.sha256, "bytes": written.size, "rows": written.rows}
    return DatasetVersion.objects.create(campaign=campaign, number=number, status=DatasetVersion.Status.READY,
                                         content_sha256=uuid.uuid4().hex, folder=folder, files=files)


@pytest.fixture
def labeled_campaign(campaign_factory, shared_data: Path):  # type: ignore[no-untyped-def]
    from annotate.models import Assignment, Solution
    from annotate.prm800k import import_prm800k

    campaign = campaign_factory(f"jobs-{uuid.uuid4().hex[:6]}")
    import_prm800k(shared_data / PRM800K_TEST, campaign, skip_invalid=True)  # 4 rows: "give_up_or_unknown"
    import_prm800k(shared_data / PRM800K_GENUINE, campaign)  # phase-2 rows: their -1 steps are the negatives
    solved = Assignment.objects.filter(solution__campaign=campaign, finish_reason="solution").values("solution_id")
    Solution.objects.filter(campaign=campaign).update(is_correct=False)
    Solution.objects.filter(pk__in=solved).update(is_correct=True)
    return campaign


@pytest.fixture
def dataset_version(labeled_campaign):  # type: ignore[no-untyped-def]
    return make_version(labeled_campaign)


@pytest.fixture
def aime_pool_file(tmp_path: Path, shared_data: Path) -> Path:
    """Three AIME 2025 problems x 8 candidates from the shared best-of-N pool (small enough to score on CPU)."""
    out = tmp_path / "aime_small.jsonl"
    with (shared_data / "bestofn/aime2025_I_k64.jsonl").open(encoding="utf-8") as src, out.open("w") as dst:
        for number, line in enumerate(src):
            if number == 3:
                break
            row = json.loads(line)
            for key in ("generated_responses", "generated_answers"):
                row[key] = row[key][:8]
            dst.write(json.dumps(row) + "\n")
    return out


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    def wait(predicate: Callable[[], Any], timeout: float = 120, every: float = 0.5, what: str = "condition") -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(every)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    return wait


@pytest.fixture
def researcher(make_user, labeled_campaign):  # type: ignore[no-untyped-def]
    from annotate.models import Membership, Role

    user = make_user(f"res-{uuid.uuid4().hex[:6]}")
    Membership.objects.create(campaign=labeled_campaign, user=user, role=Role.RESEARCHER)
    return user

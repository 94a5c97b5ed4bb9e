"""``bench/comparison.py`` at a tiny size: on the loop's small labeled campaign and a pool of 24 candidates, the
real workers snapshot, train a PRM and an ORM for 3 steps, score the pool and evaluate it, and the bench ends in
its JSON line with the best-of-N table."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.worker, pytest.mark.training, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _test_database_url() -> str:
    """The suite's test database, which the workers use too: the bench must see the campaign the test made."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


def test_a_tiny_comparison_runs_to_its_best_of_n_table(celery_worker_process, make_user, tmp_path: Path) -> None:
    from annotate.models import Membership, Role
    from rewards.jobs.services.pools import import_pool
    from tests.loop.conftest import build_campaign, write_pool

    campaign = build_campaign("bench-compare", make_user("bench-compare-labeler"))
    import_pool(write_pool(tmp_path / "pool.jsonl", campaign), "bench-compare-pool", campaign=campaign)
    admin = make_user("bench-compare-admin")
    Membership.objects.create(campaign=campaign, user=admin, role=Role.ADMIN)
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DB_CONN_MAX_AGE": "0", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "comparison.py"), "--campaign", campaign.slug,
                           "--user", admin.username, "--max-steps", "3", "--timeout", "300"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["campaign"], result["max_steps"], result["status"]) == (campaign.slug, 3, "succeeded")
    assert result["pool"] == "bench-compare-pool" and result["dataset_version"]
    assert set(result["job_seconds"]) == {"prm_job", "orm_job", "prm_scoring", "orm_scoring"}
    assert [row["n"] for row in result["best_of_n"]] and all(
        set(row) == {"n", "prm", "orm", "majority", "pass"} for row in result["best_of_n"])
    assert "step_auroc" in result["step_metrics"]
    assert "succeeded after" in done.stdout

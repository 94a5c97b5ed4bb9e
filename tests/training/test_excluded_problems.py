"""A comparison's ORM never trains on the problems of the pool it is evaluated on: the outcome export holds that
pool's own graded candidates (and any labeled solution of its problems), and the ORM's job leaves them out."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewards.training import TrainingConfigError, parse_config, run_training
from rewards.training.data import read_dataset

pytestmark = pytest.mark.django_db


def test_exclude_problems_is_a_list_of_problem_ids(tmp_path: Path) -> None:
    data = tmp_path / "o.jsonl"
    data.write_text(json.dumps({"prompt": "p", "completion": "c", "label": True}) + "\n")
    base = {"kind": "orm", "dataset": str(data), "base_model": "default", "output_dir": str(tmp_path / "out")}
    assert parse_config({**base, "exclude_problems": ["a", "b"]}).exclude_problems == ("a", "b")
    for bad in ("a", [1], [""]):
        with pytest.raises(TrainingConfigError) as refused:
            parse_config({**base, "exclude_problems": bad})
        assert refused.value.key is not None and refused.value.key.startswith("exclude_problems")


def test_the_comparisons_orm_leaves_out_the_pools_problems(settings, tmp_path: Path, make_user) -> None:
    from annotate.models import Membership, Role
    from rewards.formats.outcome import pool_problem_ids
    from rewards.jobs.models import ComparisonRun
    from rewards.jobs.services.comparisons import advance, start_comparison
    from rewards.jobs.services.pools import import_pool
    from tests.loop.conftest import build_campaign, write_pool

    settings.MEDIA_ROOT, settings.STEPLAB_EXPORT_TMP_DIR = tmp_path / "media", tmp_path / "export-tmp"
    settings.STEPLAB_JOBS_ROOT = tmp_path / "jobs"
    campaign = build_campaign("orm-excl", make_user("orm-excl-labeler"))  # 15 problems × (right, wrong), labeled
    pool, _ = import_pool(write_pool(tmp_path / "pool.jsonl", campaign), "excl-pool", campaign=campaign)
    admin = make_user("orm-excl-admin")
    Membership.objects.create(campaign=campaign, user=admin, role=Role.ADMIN)
    run = start_comparison(campaign, max_steps=30, user=admin)
    advance(run.pk)  # the snapshot stage, in this process: the version, then both training jobs
    run = ComparisonRun.objects.select_related("prm_job", "orm_job").get(pk=run.pk)
    assert run.stage == "train", run.error
    pool_ids = pool_problem_ids(pool)
    assert len(pool_ids) == 6 and run.orm_job.config["exclude_problems"] == pool_ids
    assert "exclude_problems" not in run.prm_job.config
    rows = read_dataset(Path(run.orm_job.config["dataset"]), "orm")
    on_pool = [row for row in rows if row.problem_id in pool_ids]
    assert len(on_pool) == 6 * 4 + 6 * 2  # the pool's candidates and the labeled solutions of its problems

    config = dict(run.orm_job.config, output_dir=str(tmp_path / "orm"))
    metrics = run_training(parse_config(config))
    assert metrics["data"]["train"]["excluded_rows"] == len(on_pool)
    assert metrics["data"]["train"]["rows"] + metrics["data"]["validation"]["rows"] == len(rows) - len(on_pool)

"""The migrations of the shared job layer keep every row: a "Generation" becomes a LabelingRound with its id
and fields, a job whose task was sent gets a ``dispatched_at`` (one never sent stays to be sent), an import
job keeps its status and dispatch time; and they migrate back the same way."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotate", "0007_rating_revision_keeps_removed_ratings"), ("jobs", "0004_comparison_runs")]


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def test_job_rows_survive_the_job_layer_migrations_both_ways() -> None:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = _migrate(BEFORE)
    Campaign, ImportJob = (old.get_model("annotate", name) for name in ("Campaign", "ImportJob"))
    CandidatePool, Generation, TrainingJob, ComparisonRun = (
        old.get_model("jobs", name) for name in ("CandidatePool", "Generation", "TrainingJob", "ComparisonRun"))
    campaign = Campaign.objects.create(slug="m", name="M")
    pool = CandidatePool.objects.create(name="pool", campaign=campaign)
    rounds = [Generation.objects.create(campaign=campaign, number=n, pool=pool, strategy="random", batch_size=3,
                                        status=status, selected_count=3 if status == "completed" else 0)
              for n, status in ((1, "completed"), (2, "scoring"))]
    sent = TrainingJob.objects.create(kind="prm", dataset_path="d.jsonl", celery_task_id="task-1", status="running")
    unsent = TrainingJob.objects.create(kind="orm", dataset_path="d.jsonl")
    comparison = ComparisonRun.objects.create(campaign=campaign, max_steps=5, celery_task_id="task-2")
    upload = ImportJob.objects.create(campaign=campaign, kind="problems", file="imports/p.jsonl",
                                      original_name="p.jsonl", status="succeeded", imported=4)

    new = _migrate(leaves)
    LabelingRound, TrainingJob, ComparisonRun = (
        new.get_model("jobs", name) for name in ("LabelingRound", "TrainingJob", "ComparisonRun"))
    ImportJob = new.get_model("annotate", "ImportJob")
    assert sorted(LabelingRound.objects.values_list("pk", "number", "status", "selected_count", "pool_id")) == [
        (rounds[0].pk, 1, "completed", 3, pool.pk), (rounds[1].pk, 2, "scoring", 0, pool.pk)]
    assert list(new.get_model("annotate", "Campaign").objects.get(pk=campaign.pk)
                .labeling_rounds.order_by("number").values_list("number", flat=True)) == [1, 2]
    sent_now, unsent_now = TrainingJob.objects.get(pk=sent.pk), TrainingJob.objects.get(pk=unsent.pk)
    assert (sent_now.dispatched_at, sent_now.celery_task_id, sent_now.status) == (sent.created_at, "task-1", "running")
    assert (unsent_now.dispatched_at, unsent_now.celery_task_id) == (None, "")
    assert ComparisonRun.objects.get(pk=comparison.pk).dispatched_at == comparison.created_at
    upload_now = ImportJob.objects.get(pk=upload.pk)
    assert (upload_now.status, upload_now.imported, upload_now.dispatched_at, upload_now.celery_task_id) == (
        "succeeded", 4, None, "")
    with pytest.raises(IntegrityError, match="labelinground_one_scoring_per_campaign"):
        LabelingRound.objects.create(campaign_id=campaign.pk, number=3, pool_id=pool.pk, strategy="random",
                                     batch_size=1, status="scoring")

    back = _migrate(BEFORE)
    assert sorted(back.get_model("jobs", "Generation").objects.values_list("pk", "number", "status")) == [
        (rounds[0].pk, 1, "completed"), (rounds[1].pk, 2, "scoring")]
    assert back.get_model("jobs", "TrainingJob").objects.get(pk=sent.pk).celery_task_id == "task-1"
    assert back.get_model("annotate", "ImportJob").objects.get(pk=upload.pk).status == "succeeded"
    _migrate(leaves)

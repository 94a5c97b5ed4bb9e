"""A comparison run on the real Celery worker: the readable failure at the stage at fault, and cancel."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _admin(campaign, make_user):
    from annotate.models import Membership, Role

    user = make_user(f"adm-{campaign.slug}")
    Membership.objects.create(campaign=campaign, user=user, role=Role.ADMIN)
    return user


def test_ungraded_campaign_fails_at_the_snapshot_in_one_sentence(client, celery_worker_process, labeler,
                                                                  campaign_builder, pool_writer, make_user,
                                                                  tmp_path: Path, wait_for) -> None:
    from rewards.jobs.models import ComparisonRun, TrainingJob
    from rewards.jobs.services.pools import import_pool

    campaign = campaign_builder("loop-nograde", labeler, graded=False)
    import_pool(pool_writer(tmp_path / "p.jsonl", campaign), "nograde-pool", campaign=campaign)
    assert client.login(username=_admin(campaign, make_user).username, password="pw-Steplab-1")
    response = client.post(reverse("jobs:compare_start", args=[campaign.slug]), {"max_steps": "3"})
    assert response.status_code == 302
    run = ComparisonRun.objects.get(campaign=campaign)
    wait_for(lambda: ComparisonRun.objects.filter(pk=run.pk, status="failed").exists(), timeout=120,
             what="the comparison to fail")
    run.refresh_from_db()
    assert run.stage == "snapshot"
    # the pool's graded candidates are outcome rows too, but on the problems the ORM is evaluated on
    assert run.error == ("snapshot: the outcome dataset of loop-nograde v1 has no rows outside the 6 problems of the "
                         "pool nograde-pool: none of its other solutions has a graded final answer")
    assert not TrainingJob.objects.filter(campaign=campaign).exists()  # nothing trained on a doomed version
    page = client.get(reverse("jobs:campaign_dashboard", args=[campaign.slug])).content.decode()
    assert 'data-run-status="failed"' in page
    assert "Failed: snapshot: the outcome dataset of loop-nograde v1 has no rows" in page
    api = client.get(reverse("jobs:api_comparison", args=[run.pk])).json()
    assert (api["status"], api["stage"], api["dataset_version"]) == ("failed", "snapshot", None)

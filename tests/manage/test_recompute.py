""""Recompute" under label quality shows that it runs, then the new figures, on the real worker."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotate.models import CampaignMetrics, Role
from tests.factories import CampaignFactory, MembershipFactory, UserFactory, finished_labeling, numbered_solution

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_recompute_shows_it_is_running_then_the_result(client, celery_worker_process, wait_for) -> None:
    campaign = CampaignFactory(slug="recompute")
    labeler = UserFactory(username="rater")
    MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER)
    finished_labeling(numbered_solution(campaign, 3), labeler, [1, 1, -1])
    admin = UserFactory(username="boss", is_staff=True)
    client.force_login(admin)
    before = client.get(reverse("manage:dashboard", args=["recompute"])).content.decode()
    assert "Not computed yet." in before and 'data-recompute="pending"' not in before

    answer = client.post(reverse("manage:metrics_refresh", args=["recompute"]))
    assert answer.status_code == 302 and answer["Location"].endswith("#quality")
    pending = client.get(answer["Location"]).content.decode()
    if not CampaignMetrics.objects.filter(campaign=campaign).exists():  # the worker may already be done
        assert 'data-recompute="pending"' in pending and 'hx-trigger="every 2s"' in pending
    wait_for(lambda: CampaignMetrics.objects.filter(campaign=campaign).exists(), timeout=60,
             what="the metrics task to run")
    done = client.get(reverse("manage:dashboard", args=["recompute"])).content.decode()
    assert 'data-recompute="pending"' not in done and "data-metrics-computed" in done
    assert "over 1 labeling, 3 ratings" in done

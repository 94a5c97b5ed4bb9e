"""One convention for figures across pages, the dashboard's: a share reads "70.3 %", never "0.703", and counts carry
thousands separators ("29,002" beside "41,765"); a coefficient (α, κ) stays a coefficient. A figure greyed for
resting on too little says what it needs in the unit it counts, so n = 5 steps is never "too few (at least 5)"."""
from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from steplab.jobs import JobStatus
from tests.factories import CampaignFactory, RewardModelFactory, TrainingJobFactory, UserFactory

pytestmark = pytest.mark.django_db


def _text(html: str) -> str:
    return " ".join(html.split())


def test_label_quality_shows_shares_in_percent_and_says_what_too_few_means(client) -> None:
    from annotate.models import CampaignMetrics

    campaign = CampaignFactory(slug="figures", qc_rate=0.1)
    share = {"value": 0.703, "items": 120}
    gold = {"step_accuracy": share, "first_error_exact": {"value": 0.8, "items": 5},
            "first_error_within_one": {"value": 1.0, "items": 5}, "verdict_accuracy": {"value": 0.6, "items": 5}}
    CampaignMetrics.objects.create(campaign=campaign, computed_at=timezone.now(), data={
        "labelings": 29002, "ratings": 41765, "gold_solutions": 24, "gold_overall": gold, "gold_by_labeler": [],
        "inter_annotator": {"overlapped_solutions": 3, "alpha_ordinal": {"value": 0.5, "items": 5},
                            "cohen_kappa_verdict": {"value": 0.41, "items": 5},
                            "first_error_exact": {"value": 0.25, "items": 4}},
        "time": {}})
    client.force_login(UserFactory(username="figures-boss", is_staff=True))
    page = _text(client.get(reverse("manage:dashboard", args=["figures"])).content.decode())
    assert "over 29,002 labelings, 41,765 ratings" in page
    gold_row = page.split('data-labeler="all"', 1)[1].split("</tr>", 1)[0]
    assert "70.3 % <small>n=120 steps from 5 gold labelings</small>" in gold_row
    assert "80.0 % <small>n=5 gold labelings</small>" in gold_row and "0.703" not in gold_row
    assert "data-too-few" not in gold_row  # five is enough: the threshold is "at least 5"
    alpha = page.split('data-metric="alpha"', 1)[1].split("</li>", 1)[0]
    assert "0.500" in alpha and "data-too-few" in alpha  # a coefficient, on 3 solutions
    assert "n=5 steps from 3 overlapped solutions: too few to rely on (it needs at least 5 overlapped solutions)" \
        in alpha
    cohen = page.split('data-metric="cohen"', 1)[1].split("</li>", 1)[0]
    assert "0.410 <small>n=5 solutions</small>" in cohen and "too few" not in cohen
    first_error = page.split('data-metric="first-error"', 1)[1].split("</li>", 1)[0]
    assert "25.0 %" in first_error and "(it needs at least 5 solutions)" in first_error


def test_job_and_reward_model_pages_show_percent_and_grouped_counts(client) -> None:
    job = TrainingJobFactory(status=JobStatus.SUCCEEDED, metrics={
        "method": "finetune",
        "train": {"loss": 0.5, "examples_per_s": 6.0, "tokens_per_s": 29002.4},
        "validation": {"step_level": {"accuracy": 0.856, "auroc": 0.703},
                       "solution_level": {"accuracy": 0.5, "auroc": 0.61}}})
    RewardModelFactory(name="figures-prm", metrics={"validation": {"step_level": {"auroc": 0.703}}})
    client.force_login(UserFactory(username="figures-staff", is_staff=True))
    page = _text(client.get(reverse("jobs:job", args=[job.pk])).content.decode())
    assert "step accuracy / AUROC</td><td>85.6 % / 70.3 %" in page
    assert "solution accuracy / AUROC</td><td>50.0 % / 61.0 %" in page
    assert "6.00 · 29,002" in page and "0.703" not in page
    listing = _text(client.get(reverse("jobs:index")).content.decode())
    row = listing.split("<td>figures-prm</td>", 1)[1].split("</tr>", 1)[0]
    assert "70.3 % (step)" in row and "0.703" not in row


def test_the_datasets_page_groups_its_counts(client) -> None:
    from annotate.models import Membership, Role
    from tests.factories import DatasetVersionFactory

    campaign = CampaignFactory(slug="big-counts")
    DatasetVersionFactory(campaign=campaign, counts={
        "problems": 12000, "solutions": 41765, "assignments": 29002,
        "ratings": {"negative": 21708, "neutral": 4214, "positive": 29002},
        "split": {"train": {"problems": 10800}, "test": {"problems": 1200}}})
    researcher = UserFactory(username="counts-researcher")
    Membership.objects.create(campaign=campaign, user=researcher, role=Role.RESEARCHER)
    client.force_login(researcher)
    page = _text(client.get(reverse("pages:datasets")).content.decode())
    assert '<td data-count="solutions">41,765</td>' in page and '<td data-count="assignments">29,002</td>' in page
    assert "<td data-distribution>21,708 / 4,214 / 29,002" in page and "<td>10,800 / 1,200</td>" in page

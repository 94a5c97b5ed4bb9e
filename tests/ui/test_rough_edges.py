"""The rough edges a new user's walk-through hit: each page offers only what the role may do and says things in
words a user can act on."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotate.models import Role
from tests.factories import CampaignFactory, DatasetVersionFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_campaign_page_offers_labeling_only_to_who_may_label(client) -> None:
    campaign = CampaignFactory(slug="offers")
    for role, may_label in ((Role.LABELER, True), (Role.ADMIN, True), (Role.RESEARCHER, False)):
        user = UserFactory(username=f"as-{role}")
        MembershipFactory(campaign=campaign, user=user, role=role)
        client.force_login(user)
        page = client.get(reverse("annotate:campaign", args=["offers"])).content.decode()
        assert ('data-action="start"' in page) is may_label, role
        if not may_label:  # what they may do instead, and why there is no labeling button
            assert "You are a researcher in this campaign" in page
            assert reverse("jobs:campaign_dashboard", args=["offers"]) in page
            assert reverse("pages:datasets") in page


def test_datasets_page_shows_a_user_no_link_they_would_be_refused(client) -> None:
    campaign = CampaignFactory(slug="ds")
    DatasetVersionFactory(campaign=campaign, files={"trl-stepwise": {"sha256": "ab", "rows": 1}})
    for role in (Role.LABELER, Role.RESEARCHER):
        user = UserFactory(username=f"ds-{role}")
        MembershipFactory(campaign=campaign, user=user, role=role)
        client.force_login(user)
        page = client.get(reverse("pages:datasets")).content.decode()
        assert ('data-download="trl-stepwise"' in page) is (role == Role.RESEARCHER)
        if role == Role.LABELER:
            assert "Dataset versions are for researchers and campaign admins" in page
            for link in set(re.findall(r'href="(/[^"#]*)"', page)) - {reverse("logout")}:
                assert client.get(link).status_code not in (403, 404), link


def test_a_lapsed_lease_is_explained_on_the_next_solutions_page(client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Assignment, AssignmentStatus
    from annotate.services.leases import reap_expired_leases
    from tests.factories import RatingFactory, numbered_solution

    campaign = CampaignFactory(slug="lapse", lease_minutes=30)
    first, _second = numbered_solution(campaign, 3), numbered_solution(campaign, 3)
    labeler = UserFactory(username="lapser")
    MembershipFactory(campaign=campaign, user=labeler, role=Role.LABELER, passed_screening=True)
    client.force_login(labeler)
    landed = client.post(reverse("annotate:start", args=["lapse"]), follow=True).content.decode()
    assert "ran out" not in landed
    leased = Assignment.objects.get(labeler=labeler)
    assert leased.solution == first
    for step in first.steps.all():  # fully rated, never submitted
        RatingFactory(assignment=leased, completion=step.completions.first(), rating=1)
    Assignment.objects.filter(pk=leased.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    assert reap_expired_leases() == 1

    page = client.post(reverse("annotate:start", args=["lapse"]), follow=True).content.decode()
    newest = Assignment.objects.filter(labeler=labeler).latest("pk")
    assert newest.pk != leased.pk and newest.status == AssignmentStatus.LEASED
    assert "Your lease on your previous solution ran out at" in page
    assert "The 3 ratings you gave are kept with it" in page and "This is a new solution." in page
    again = client.post(reverse("annotate:start", args=["lapse"]), follow=True).content.decode()
    assert "ran out" not in again  # said once, on the page the labeler landed on


def test_campaign_settings_offer_automatic_training_and_say_a_slug_is_taken(client) -> None:
    from annotate.models import AutoTrain, Campaign

    client.force_login(UserFactory(username="boss", is_staff=True))
    data = {"name": "Gen 2", "slug": "gen-2", "mode": "stepwise", "overlap": 1, "qc_rate": 10,
            "screening_pass_threshold": 80, "lease_minutes": 20, "export_interval_minutes": 60,
            "quality_threshold": 50, "quality_min_items": 5}
    assert client.post(reverse("manage:new"), data).status_code == 302  # a form without the new settings
    campaign = Campaign.objects.get(slug="gen-2")
    assert (campaign.auto_train, campaign.auto_train_max_steps) == (AutoTrain.ON, 24)  # the defaults
    edit = client.get(reverse("manage:edit", args=["gen-2"])).content.decode()
    assert 'name="auto_train"' in edit and 'name="auto_train_max_steps"' in edit
    changed = client.post(reverse("manage:edit", args=["gen-2"]),
                          {**data, "auto_train": "off", "auto_train_max_steps": 12})
    assert changed.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.auto_train, campaign.auto_train_max_steps) == (AutoTrain.OFF, 12)
    bad = client.post(reverse("manage:edit", args=["gen-2"]), {**data, "auto_train_max_steps": 0})
    assert bad.status_code == 400 and "auto_train_max_steps must be at least 1" in bad.content.decode()

    duplicate = client.post(reverse("manage:new"), data).content.decode()
    assert "A campaign with this short name already exists: choose another." in duplicate
    assert "Campaign with this Slug already exists" not in duplicate
    assert "phase 2" not in campaign.get_mode_display()


def test_quality_figures_say_what_they_rest_on(client) -> None:
    from django.utils import timezone

    from annotate.models import CampaignMetrics

    campaign = CampaignFactory(slug="q", qc_rate=0.1)
    none = {"value": None, "items": 0}
    gold = {"step_accuracy": none, "first_error_exact": none, "first_error_within_one": none,
            "verdict_accuracy": none}
    CampaignMetrics.objects.create(campaign=campaign, computed_at=timezone.now(), data={
        "labelings": 3, "ratings": 9, "gold_solutions": 24, "gold_overall": gold, "gold_by_labeler": [],
        "inter_annotator": {"overlapped_solutions": 1, "alpha_ordinal": {"value": 1.0, "items": 12},
                            "cohen_kappa_verdict": {"value": 0.41, "items": 30}},
        "time": {}})
    client.force_login(UserFactory(username="boss", is_staff=True))
    page = client.get(reverse("manage:dashboard", args=["q"])).content.decode()
    alpha = page.split('data-metric="alpha"', 1)[1].split("</li>", 1)[0]
    assert "data-too-few" in alpha and "1.000" in alpha
    assert ("n=12 steps from 1 overlapped solution: too few to rely on (it needs at least 5 overlapped "
            "solutions)") in alpha
    cohen = page.split('data-metric="cohen"', 1)[1].split("</li>", 1)[0]
    assert "0.410 <small>n=30 solutions</small>" in cohen and "data-too-few" not in cohen
    assert "data-gold-why-empty" in page and "No labeling of a gold solution yet" in page
    assert "24 gold solutions" in page and "10% of served solutions" in page


def test_small_words(client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Assignment, AssignmentStatus
    from rewards.jobs.models import ComparisonRun
    from tests.factories import AssignmentFactory, numbered_solution

    campaign = CampaignFactory(slug="words")
    AssignmentFactory(solution=numbered_solution(campaign, 2), finished_at=timezone.now() - timedelta(hours=1))
    assert Assignment.objects.filter(status=AssignmentStatus.SUBMITTED).count() == 1
    ComparisonRun.objects.create(campaign=campaign, max_steps=3, status="running", stage="train")
    client.force_login(UserFactory(username="boss", is_staff=True))
    manage = client.get(reverse("manage:dashboard", args=["words"])).content.decode()
    rate = manage.split("data-labels-per-hour>", 1)[1].split("</p>", 1)[0]
    assert rate == "Labelings in the last 24 h: 1 (fewer than one an hour)"
    dashboard = client.get(reverse("jobs:dashboard")).content.decode()
    header = dashboard.split("</h1>", 1)[1].split("</p>", 1)[0]
    assert "·" not in header.split("<a", 1)[0] and "Campaigns: <a" in header
    board = client.get(reverse("jobs:campaign_dashboard", args=["words"])).content.decode()
    assert "now: <span data-stage>Train a PRM and an ORM</span>" in board
    assert "train a prm and an orm" not in board


def test_math_verify_timeout_warning_says_what_it_means(caplog) -> None:
    import logging

    import stepcore.grading  # noqa: F401 — importing it installs the explanation on math-verify's logger

    with caplog.at_level(logging.WARNING, logger="math_verify.grader"):
        logging.getLogger("math_verify.grader").warning("Timeout during comparison")  # math-verify's own words
    (record,) = caplog.records
    assert record.getMessage().startswith("grading: math-verify gave up comparing an answer with the ground truth")
    assert "graded as not matching" in record.getMessage()

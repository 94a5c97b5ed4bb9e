"""The rough edges a new user's walk-through hit: each page offers only what the role may do and says things in
words a user can act on."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotate.models import Role
from tests.factories import CampaignFactory, DatasetVersionFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_campaign_page_offers_labeling_only_to_who_may_label(client) -> None:  # type: ignore[no-untyped-def]
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


def test_datasets_page_shows_a_user_no_link_they_would_be_refused(client) -> None:  # type: ignore[no-untyped-def]
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


def test_a_lapsed_lease_is_explained_on_the_next_solutions_page(client) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Assignment, AssignmentStatus
    from annotate.services.labeling import reap_expired_leases
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

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

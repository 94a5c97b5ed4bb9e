"""A campaign a user is not a member of answers exactly like a campaign that does not exist (404), on every page and
API route that names a campaign, so slugs and ids cannot be probed for existence."""
from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.hardening.test_access_matrix import RULES, World, world  # noqa: F401  (a fixture)

MADE_UP = {"slug": "no-such-campaign", "campaign_id": 987654321, "pk": 987654321}


def _campaign_routes(w: World) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, method, kwargs) of the routes whose only object is the campaign, by slug or by id."""
    routes = []
    for name, rule in RULES.items():
        kwargs = rule.kwargs(w)
        if kwargs in ({"slug": w.a.slug}, {"campaign_id": w.a.pk}) or (
                name.startswith("api:campaign-") and kwargs == {"pk": w.a.pk}):
            routes.append((name, rule.method, kwargs))
    return routes


@pytest.fixture
def outsiders(world: World) -> dict[str, Any]:  # noqa: F811  (a fixture)
    """Members of campaign B only: its labeler (the reward-model area is closed to them as a whole) and a
    researcher there (it is open to them)."""
    from annotate.models import Campaign, Role
    from tests.factories import MembershipFactory, UserFactory

    researcher = UserFactory(username="researcher-of-b")
    MembershipFactory(campaign=Campaign.objects.get(slug="b"), user=researcher, role=Role.RESEARCHER)
    return {"labeler of B": world.users["labeler_out"], "researcher of B": researcher}


@pytest.mark.django_db
def test_a_non_member_cannot_tell_an_existing_campaign_from_a_made_up_one(world: World, outsiders) -> None:  # noqa: F811
    routes = _campaign_routes(world)
    assert len(routes) >= 30, "the walk must reach the campaign routes"
    differ = []
    for who, user in outsiders.items():
        client = Client()
        client.force_login(user)
        for name, method, kwargs in routes:
            real = getattr(client, method)(reverse(name, kwargs=kwargs))
            fake = getattr(client, method)(reverse(name, kwargs={key: MADE_UP[key] for key in kwargs}))
            # a 404 both times; the reward-model pages refuse B's labeler as a whole (a 403, whatever the campaign)
            closed = name.startswith("jobs:") and not name.startswith("jobs:api_")
            expected = 403 if who == "labeler of B" and closed else 404
            if (real.status_code, fake.status_code) != (expected, expected):
                differ.append(f"{who}: {method.upper()} {name}: existing {real.status_code}, "
                              f"made-up {fake.status_code}")
    assert not differ, "\n".join(differ)

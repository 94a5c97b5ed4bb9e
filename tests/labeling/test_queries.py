"""Hot paths stay flat: the workspace GET and the rating POST cost the same queries for 3 steps or 60."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate.models import Assignment, CampaignMode

from .conftest import PASSWORD, add_solution

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def _leased(campaign_factory, member, slug: str, steps: int, mode: str = CampaignMode.STEPWISE):  # type: ignore[no-untyped-def]
    campaign = campaign_factory(slug, mode=mode)
    texts = [f"Step {i}: $x_{i} = {i}$" for i in range(steps)]
    add_solution(campaign, texts if mode == CampaignMode.STEPWISE else [[t, t + " (alt)"] for t in texts])
    user = member(campaign, f"lab-{slug}")
    client = Client()
    client.login(username=user.username, password=PASSWORD)
    client.post(f"/c/{slug}/start")
    return client, Assignment.objects.get(labeler=user)


def _count(call) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as queries:
        response = call()
    assert response.status_code == 200, response.content[:500]
    return len(queries)


@pytest.mark.parametrize("mode", [CampaignMode.STEPWISE, CampaignMode.CONVERSATIONAL])
def test_workspace_get_is_flat(campaign_factory, member, django_assert_max_num_queries, mode) -> None:  # type: ignore[no-untyped-def]
    counts = []
    for steps in (3, 60):
        client, assignment = _leased(campaign_factory, member, f"w{steps}{mode[:4]}", steps, mode)
        for index in range(steps // 3):  # some ratings (and decisions) already given
            if mode == CampaignMode.STEPWISE:
                client.post(f"/assignments/{assignment.pk}/rate", {"step_index": index, "rating": 1}, **HX)
            else:
                for completion in (0, 1):
                    client.post(f"/assignments/{assignment.pk}/rate",
                                {"step_index": index, "rating": 1, "completion_index": completion}, **HX)
                client.post(f"/assignments/{assignment.pk}/decide", {"step_index": index, "chosen_completion": 0},
                            **HX)
        with django_assert_max_num_queries(8):
            # Counted at once, within this iteration: the closure never outlives its client and assignment.
            counts.append(_count(lambda: client.get(f"/assignments/{assignment.pk}/")))  # noqa: B023
    assert counts[0] == counts[1], counts


def test_rating_post_is_flat(campaign_factory, member, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    counts = []
    for steps in (3, 60):
        client, assignment = _leased(campaign_factory, member, f"r{steps}", steps)
        for index in range(2):
            client.post(f"/assignments/{assignment.pk}/rate", {"step_index": index, "rating": 1}, **HX)
        url = f"/assignments/{assignment.pk}/rate"
        with django_assert_max_num_queries(10):
            # Counted at once, within this iteration: the closures never outlive their client and url.
            new = _count(lambda: client.post(url, {"step_index": 2, "rating": 0, "time_ms": 900}, **HX))  # noqa: B023
        with django_assert_max_num_queries(11):  # the same, plus the revision it keeps
            changed = _count(lambda: client.post(url, {"step_index": 1, "rating": 0, "time_ms": 500}, **HX))  # noqa: B023
        counts.append((new, changed))
    assert counts[0] == counts[1], counts

"""Hot paths cost an exact, flat number of queries: the workspace GET and the rating POST the same for 3 steps
or 60, the lease the same for 1 open solution or 20. The counts are as measured; each is listed by what it is
for, so a new query shows up as a changed number with a place to say why. (The service's transaction is a
savepoint inside the test's transaction, hence the SAVEPOINT / RELEASE pairs.)"""
from __future__ import annotations

from functools import partial

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate.models import Assignment, CampaignMode
from tests.factories import PASSWORD, solution_with_steps

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}

# session, user, the assignment with its solution and campaign, the labeler's membership, the completions with
# their steps, the ratings, the step decisions, the lease renewal (an open page is a live lease)
WORKSPACE_GET = 8
# session, user, SAVEPOINT, the assignment (locked), its ratings, the completions with their steps, INSERT the
# rating, INSERT the step decision (ON CONFLICT DO NOTHING), UPDATE the lease and updated_at, RELEASE
RATING_POST_NEW = 10
# the same, with INSERT of the rating revision and UPDATE of the rating instead of the rating's INSERT
RATING_POST_CHANGED = 11
# session, user, campaign, SAVEPOINT, membership, the labeler's open assignment (none), their newest assignment
# (did its lease run out unsubmitted? the page then says so), "has the campaign a screening set?", the next
# solution (skip-locked claim), UPDATE its label_count, INSERT the assignment, RELEASE
LEASE_NEW = 12
# session, user, campaign, SAVEPOINT, membership, the open assignment (found), UPDATE its lease, RELEASE
LEASE_OPEN = 8


def _leased(campaign_factory, member, slug: str, steps: int, mode: str = CampaignMode.STEPWISE):
    campaign = campaign_factory(slug, mode=mode)
    texts = [f"Step {i}: $x_{i} = {i}$" for i in range(steps)]
    solution_with_steps(campaign, texts if mode == CampaignMode.STEPWISE else [[t, t + " (alt)"] for t in texts])
    user = member(campaign, f"lab-{slug}")
    client = Client()
    client.login(username=user.username, password=PASSWORD)
    client.post(f"/c/{slug}/start")
    return client, Assignment.objects.get(labeler=user)


def _count(call, status: int = 200) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = call()
    assert response.status_code == status, response.content[:500]
    return len(queries)


@pytest.mark.parametrize("mode", [CampaignMode.STEPWISE, CampaignMode.CONVERSATIONAL])
def test_workspace_get_is_flat(campaign_factory, member, django_assert_num_queries, mode) -> None:
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
        with django_assert_num_queries(WORKSPACE_GET):
            counts.append(_count(partial(client.get, f"/assignments/{assignment.pk}/")))
    assert counts[0] == counts[1], counts


def test_rating_post_is_flat(campaign_factory, member, django_assert_num_queries) -> None:
    counts = []
    for steps in (3, 60):
        client, assignment = _leased(campaign_factory, member, f"r{steps}", steps)
        for index in range(2):
            client.post(f"/assignments/{assignment.pk}/rate", {"step_index": index, "rating": 1}, **HX)
        url = f"/assignments/{assignment.pk}/rate"
        with django_assert_num_queries(RATING_POST_NEW):
            new = _count(partial(client.post, url, {"step_index": 2, "rating": 0, "time_ms": 900}, **HX))
        with django_assert_num_queries(RATING_POST_CHANGED):  # the same, plus the revision it keeps
            changed = _count(partial(client.post, url, {"step_index": 1, "rating": 0, "time_ms": 500}, **HX))
        counts.append((new, changed))
    assert counts[0] == counts[1], counts


def test_lease_is_flat(campaign_factory, member, django_assert_num_queries) -> None:
    counts = []
    for solutions in (1, 20):
        campaign = campaign_factory(f"lease{solutions}")
        for _ in range(solutions):
            solution_with_steps(campaign, [f"Step {i}: $x_{i} = {i}$" for i in range(3)])
        user = member(campaign, f"lab-lease{solutions}")
        client = Client()
        client.login(username=user.username, password=PASSWORD)
        url = f"/c/{campaign.slug}/start"
        with django_assert_num_queries(LEASE_NEW):
            new = _count(lambda: client.post(url), status=302)  # noqa: B023  (called at once)
        with django_assert_num_queries(LEASE_OPEN):  # the open lease is renewed, not a second one made
            again = _count(lambda: client.post(url), status=302)  # noqa: B023  (called at once)
        counts.append((new, again))
    assert Assignment.objects.count() == 2
    assert counts[0] == counts[1], counts

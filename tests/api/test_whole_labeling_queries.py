"""The whole-solution POST costs a fixed number of queries plus a fixed number per step: each step goes through
the page's rating service (its lock, reads and writes as tests/labeling/test_queries.py counts them), then one
finish. The counts are as measured, listed by what they are for, so a new query shows up as a changed number."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Membership, Role
from tests.factories import numbered_solution

from .conftest import token_client

pytestmark = pytest.mark.django_db

# per step, record_rating as the page's rating POST runs it less its session and user: SAVEPOINT, the assignment
# (locked, with its step count), its ratings, the completions with their steps, INSERT the rating, INSERT the
# step decision (ON CONFLICT DO NOTHING), UPDATE the lease, RELEASE
PER_STEP = 8
# the token and the UPDATE of its last use, "is this assignment yours?", SAVEPOINT / RELEASE of the whole
# labeling, SAVEPOINT + INSERT + RELEASE of the client key, the finish (SAVEPOINT, the locked assignment with its
# step count, its ratings, UPDATE, RELEASE), the answer (the assignment, its ratings, decisions, steps,
# completions)
FIXED = 18


def _count(steps: int, slug: str, campaign_factory, make_user) -> int:  # type: ignore[no-untyped-def]
    campaign = campaign_factory(slug)
    numbered_solution(campaign, steps)
    user = make_user(f"judge-{slug}")
    Membership.objects.create(campaign=campaign, user=user, role=Role.LABELER)
    client, _ = token_client(user, "write")
    assignment = client.post(f"/api/campaigns/{campaign.pk}/lease/").json()["assignment"]["id"]
    body = {"ratings": [{"step_index": i, "rating": 1} for i in range(steps)], "client_key": slug}
    with CaptureQueriesContext(connection) as queries:
        answer = client.post(f"/api/assignments/{assignment}/labeling/", body, format="json")
    assert answer.status_code == 200, answer.content
    return len(queries)


def test_the_whole_solution_post_costs_a_fixed_count_per_step(campaign_factory, make_user) -> None:  # type: ignore[no-untyped-def]
    counts = {steps: _count(steps, f"q{steps}", campaign_factory, make_user) for steps in (3, 10)}
    assert counts == {3: FIXED + 3 * PER_STEP, 10: FIXED + 10 * PER_STEP}, counts

"""The whole-solution POST costs an exact number of queries: flat for an untouched pass (the ratings written at
once), a fixed number per step for a pass begun on the page (each step through the page's rating service). The
counts are as measured, listed by what they are for, so a new query shows up as a changed number."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.models import Membership, Role
from tests.factories import numbered_solution

from .conftest import token_client

pytestmark = pytest.mark.django_db

# the token (its last use, written by the lease just before, is not written again), SAVEPOINT / RELEASE of the
# whole labeling, the client key's INSERT … ON CONFLICT DO NOTHING (no savepoint of its own); "is this assignment
# yours?" is asked only of a refused request
AROUND = 4
# an untouched pass: the locked assignment, the solution's steps with "any rating yet?", one INSERT of the ratings,
# one INSERT of the step decisions (ON CONFLICT DO NOTHING), the UPDATE that finishes it; the answer is built from
# what is in memory
UNTOUCHED = AROUND + 5
# a pass begun on the page: the finish (SAVEPOINT, the locked assignment with its step count, its ratings, UPDATE,
# RELEASE) and the answer read back (the assignment, its ratings, decisions, steps, completions)
BEGUN = AROUND + 5 + 5
# per step of a pass begun on the page, record_rating as the page's rating POST runs it less its session and
# user: SAVEPOINT, the assignment (locked, with its step count), its ratings, the completions with their steps,
# INSERT the rating, INSERT the step decision (ON CONFLICT DO NOTHING), UPDATE the lease, RELEASE
PER_STEP = 8


def _count(steps: int, slug: str, campaign_factory, make_user, *, begun: bool = False) -> int:
    campaign = campaign_factory(slug)
    numbered_solution(campaign, steps)
    user = make_user(f"judge-{slug}")
    Membership.objects.create(campaign=campaign, user=user, role=Role.LABELER)
    client, _ = token_client(user, "write")
    assignment = client.post(f"/api/campaigns/{campaign.pk}/lease/").json()["assignment"]["id"]
    first = 0
    if begun:  # the labeler rated step 1 on the page; the program sends the rest
        client.post(f"/api/assignments/{assignment}/rate/", {"step_index": 0, "rating": 1}, format="json")
        first = 1
    body = {"ratings": [{"step_index": i, "rating": 1} for i in range(first, steps)], "client_key": slug}
    with CaptureQueriesContext(connection) as queries:
        answer = client.post(f"/api/assignments/{assignment}/labeling/", body, format="json")
    assert answer.status_code == 200, answer.content
    assert [r["rating"] for r in answer.json()["ratings"]] == [1] * steps
    return len(queries)


def test_an_untouched_pass_costs_the_same_for_3_steps_or_40(campaign_factory, make_user) -> None:
    counts = {steps: _count(steps, f"u{steps}", campaign_factory, make_user) for steps in (3, 40)}
    assert counts == {3: UNTOUCHED, 40: UNTOUCHED}, counts


def test_a_pass_begun_on_the_page_costs_a_fixed_count_per_step(campaign_factory, make_user) -> None:
    counts = {steps: _count(steps, f"b{steps}", campaign_factory, make_user, begun=True) for steps in (3, 10)}
    assert counts == {3: BEGUN + 2 * PER_STEP, 10: BEGUN + 9 * PER_STEP}, counts

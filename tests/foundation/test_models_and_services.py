"""Database constraints carry the invariants; rating history is kept; leases respect overlap under concurrency."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Problem,
    Rating,
    RatingRevision,
    Role,
    Solution,
)
from annotate.scales import RATING_MAX
from annotate.services.errors import LabelingError
from annotate.services.labeling import record_rating, submit_assignment
from annotate.services.leases import lease_next_solution, reap_expired_leases
from tests.factories import AssignmentFactory, MembershipFactory, ProblemFactory, RatingFactory, SolutionFactory


def _solution(campaign: Campaign, steps: int = 3, text: str = "p") -> Solution:
    problem = ProblemFactory(text=f"{text}-{Problem.objects.count()}", answer="1")
    return SolutionFactory(campaign=campaign, problem=problem, steps=[f"step {index}" for index in range(steps)])


@pytest.mark.django_db
def test_rating_must_be_in_range(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    solution = _solution(campaign)
    assignment = AssignmentFactory(solution=solution, labeler=make_user("a"))
    # the check constraint itself (a raw create): the stored range holds every label scale's values
    # (annotate/scales.py); the campaign's scale is the service's rule
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(assignment=assignment, completion=solution.steps.first().completions.first(),
                              rating=RATING_MAX + 1)


@pytest.mark.django_db
def test_one_rating_per_assignment_and_completion(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    solution = _solution(campaign)
    assignment = AssignmentFactory(solution=solution, labeler=make_user("a"))
    completion = solution.steps.first().completions.first()
    RatingFactory(assignment=assignment, completion=completion, rating=1)
    with pytest.raises(IntegrityError), transaction.atomic():  # the unique constraint itself: a raw create
        Rating.objects.create(assignment=assignment, completion=completion, rating=0)


@pytest.mark.django_db
def test_one_open_assignment_per_labeler_and_solution(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    solution = _solution(campaign)
    user = make_user("a")
    # the partial unique constraint itself is under test: raw creates of open (leased) rows
    Assignment.objects.create(solution=solution, labeler=user, status=AssignmentStatus.LEASED)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(solution=solution, labeler=user, status=AssignmentStatus.LEASED)
    # A finished one does not block a new pass.
    Assignment.objects.filter(solution=solution).update(status=AssignmentStatus.SUBMITTED, finish_reason="give_up")
    Assignment.objects.create(solution=solution, labeler=user, status=AssignmentStatus.LEASED)


@pytest.mark.django_db
def test_campaign_checks(campaign_factory) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        campaign_factory("zero", overlap=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        campaign_factory("qc", qc_rate=1.5)


@pytest.mark.django_db
def test_changed_rating_keeps_its_history(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    _solution(campaign)
    user = make_user("lab")
    MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    assignment = lease_next_solution(campaign, user).assignment
    assert assignment is not None
    record_rating(assignment.pk, user=user, step_index=0, rating=1)
    record_rating(assignment.pk, user=user, step_index=0, rating=0)
    record_rating(assignment.pk, user=user, step_index=0, rating=0)  # same value: idempotent, no new revision
    rating = Rating.objects.get(assignment=assignment)
    assert rating.rating == 0
    assert list(RatingRevision.objects.filter(rating=rating).values_list("previous_rating", flat=True)) == [1]


@pytest.mark.django_db
def test_stop_at_first_error_is_enforced(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    _solution(campaign, steps=4)
    user = make_user("lab")
    MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    assignment = lease_next_solution(campaign, user).assignment
    record_rating(assignment.pk, user=user, step_index=0, rating=1)
    record_rating(assignment.pk, user=user, step_index=1, rating=-1)
    with pytest.raises(LabelingError):
        record_rating(assignment.pk, user=user, step_index=2, rating=1)
    submit_assignment(assignment.pk, user=user)
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.finish_reason == "found_error"
    with pytest.raises(LabelingError):
        record_rating(assignment.pk, user=user, step_index=2, rating=1)


@pytest.mark.django_db
def test_outsiders_cannot_lease(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    _solution(campaign)
    with pytest.raises(LabelingError):
        lease_next_solution(campaign, make_user("outsider"))


@pytest.mark.django_db
def test_expired_leases_are_reaped(campaign_factory, make_user) -> None:
    campaign = campaign_factory()
    _solution(campaign)
    user = make_user("lab")
    MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    assignment = lease_next_solution(campaign, user).assignment
    assert reap_expired_leases(now=timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)) == 1
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.EXPIRED
    assert Solution.objects.get().label_count == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_leases_never_exceed_overlap(campaign_factory, make_user) -> None:
    """Eight labelers lease at once from real PostgreSQL connections: each solution goes to at most k of them."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    campaign = campaign_factory(overlap=2)
    for _ in range(3):
        _solution(campaign)
    users = [make_user(f"lab{i}") for i in range(8)]
    for user in users:
        MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    barrier = threading.Barrier(len(users))
    leased: list[int | None] = []
    errors: list[BaseException] = []

    def work(user) -> None:
        try:
            barrier.wait()
            outcome = lease_next_solution(campaign, user)
            leased.append(outcome.assignment.solution_id if outcome.assignment else None)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=work, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    got = [s for s in leased if s is not None]
    assert len(got) == 6 and leased.count(None) == 2
    assert all(got.count(s) == 2 for s in set(got))
    assert all(s.label_count == 2 for s in Solution.objects.all())

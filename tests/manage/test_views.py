"""The /manage/ workspace: permission matrix for every URL, campaign settings, members, adjudication, and
dashboard query counts that stay flat as the campaign grows."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    Completion,
    FinishReason,
    Membership,
    Rating,
    ResolvedLabel,
    Role,
    Solution,
    Step,
)
from rewards.exports import ExportOptions, iter_format_rows
from steplab.bulk import insert_rows, refresh_planner_statistics
from tests.factories import ImportJobFactory, MembershipFactory, ProblemFactory, finished_labeling, numbered_solution


@pytest.fixture
def world(campaign_factory, member, personas):
    campaign = campaign_factory("alpha", overlap=2)
    users = personas(campaign, labeler=member(campaign, "lab"), elsewhere=campaign_factory("beta"))
    solution = numbered_solution(campaign, 3)
    finished_labeling(solution, users["labeler"], [1, 1, -1])
    job = ImportJobFactory(campaign=campaign, kind="problems", original_name="x.jsonl", file="imports/x.jsonl")
    return campaign, users, solution, job


def urls_for(campaign: Campaign, user_id: int, solution_id: int, job_id: int) -> list[tuple[str, str]]:
    slug = campaign.slug
    return [
        ("get", reverse("manage:dashboard", args=[slug])),
        ("get", reverse("manage:edit", args=[slug])),
        ("post", reverse("manage:archive", args=[slug])),
        ("post", reverse("manage:metrics_refresh", args=[slug])),
        ("get", reverse("manage:members", args=[slug])),
        ("get", reverse("manage:labeler", args=[slug, user_id])),
        ("post", reverse("manage:member_state", args=[slug, user_id])),
        ("get", reverse("manage:imports", args=[slug])),
        ("get", reverse("manage:import", args=[slug, job_id])),
        ("get", reverse("manage:import_progress", args=[slug, job_id])),
        ("get", reverse("manage:adjudication", args=[slug])),
        ("get", reverse("manage:review", args=[slug, solution_id])),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("who,allowed", [
    ("anonymous", None), ("labeler", False), ("researcher", False), ("other_admin", False), ("owner", True),
    ("staff", True),
])
def test_permission_matrix(client, world, who, allowed) -> None:
    campaign, users, solution, job = world
    if who != "anonymous":
        client.force_login(users[who])
    for method, url in urls_for(campaign, users["labeler"].pk, solution.pk, job.pk):
        response = getattr(client, method)(url, {"action": "pause"} if "state" in url else {})
        if allowed is None:
            assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
        elif allowed:
            assert response.status_code in (200, 302), (url, response.status_code)
            assert "/accounts/login/" not in response.get("Location", "")
        else:  # a member without the role is told why; a non-member learns nothing (as for a made-up slug)
            assert response.status_code == (404 if who == "other_admin" else 403), (url, response.status_code)
    # Pages not tied to one campaign: any campaign admin or staff, nobody else.
    for url in (reverse("manage:index"), reverse("manage:new")):
        response = client.get(url)
        expected = 302 if allowed is None else 200 if allowed or who == "other_admin" else 403
        assert response.status_code == expected, (url, who)


@pytest.mark.django_db
def test_admin_of_one_campaign_sees_only_it(client, world) -> None:
    _, users, _, _ = world
    client.force_login(users["other_admin"])
    page = client.get(reverse("manage:index")).content.decode()
    assert 'data-campaign="beta"' in page and 'data-campaign="alpha"' not in page


@pytest.mark.django_db
def test_create_edit_archive_campaign(client, make_user) -> None:
    client.force_login(make_user("boss", is_staff=True))
    data = {"name": "Gen 2", "slug": "gen-2", "mode": "stepwise", "instructions": "Rate each step. $x^2$ **bold**",
            "overlap": 3, "qc_rate": 10, "screening_pass_threshold": 80, "lease_minutes": 20,
            "export_interval_minutes": 60, "quality_threshold": 50, "quality_min_items": 5}
    response = client.post(reverse("manage:new"), data)
    assert response.status_code == 302
    campaign = Campaign.objects.get(slug="gen-2")
    assert (campaign.overlap, campaign.qc_rate, campaign.lease_minutes) == (3, 0.1, 20)
    assert Membership.objects.get(campaign=campaign).role == Role.ADMIN
    edit = client.get(reverse("manage:edit", args=["gen-2"])).content.decode()
    assert "<strong>bold</strong>" in edit and "$x^2$" in edit  # Markdown rendered, math kept for KaTeX
    assert 'name="qc_rate" value="10"' in edit and 'name="screening_pass_threshold" value="80"' in edit  # in %
    bad = client.post(reverse("manage:edit", args=["gen-2"]), {**data, "qc_rate": 150, "overlap": 0})
    assert bad.status_code == 400
    text = bad.content.decode()
    assert 'data-field-error="qc_rate"' in text and "qc_rate must be between 0 and 100 %" in text
    assert 'data-field-error="overlap"' in text
    campaign.refresh_from_db()
    assert campaign.qc_rate == 0.1
    duplicate = client.post(reverse("manage:new"), data)
    assert duplicate.status_code == 400 and Campaign.objects.filter(slug="gen-2").count() == 1
    client.post(reverse("manage:archive", args=["gen-2"]), {"archived": "1"})
    campaign.refresh_from_db()
    assert campaign.is_active is False
    client.post(reverse("manage:archive", args=["gen-2"]), {"archived": "0"})
    campaign.refresh_from_db()
    assert campaign.is_active is True


@pytest.mark.django_db
def test_members_add_deactivate_and_labeler_page(client, world, make_user) -> None:
    campaign, users, _, _ = world
    client.force_login(users["owner"])
    newbie = make_user("newbie")
    url = reverse("manage:members", args=[campaign.slug])
    assert client.post(url, {"username": "newbie", "role": "researcher"}).status_code == 302
    assert not Membership.objects.filter(campaign=campaign, user=newbie).exists()  # invited, until it accepts
    invited = Client()
    invited.force_login(newbie)
    invitation = newbie.invitations.get()
    answer = {"invitation": invitation.pk, "answer": "accept"}
    assert invited.post(reverse("annotate:invitations"), answer).status_code == 302
    assert Membership.objects.get(campaign=campaign, user__username="newbie").role == Role.RESEARCHER
    missing = client.post(url, {"username": "ghost", "role": "labeler"})
    assert missing.status_code == 302  # answered as for an account that exists
    bad_role = client.post(url, {"username": "newbie", "role": "king"})
    assert bad_role.status_code == 400 and "role must be" in bad_role.content.decode()
    lab = users["labeler"]
    client.post(reverse("manage:member_state", args=[campaign.slug, lab.pk]), {"action": "deactivate"})
    assert Membership.objects.get(campaign=campaign, user=lab).is_active is False
    bad = client.post(reverse("manage:member_state", args=[campaign.slug, lab.pk]), {"action": "explode"})
    assert bad.status_code == 400 and "action must be" in bad.content.decode()
    page = client.get(reverse("manage:labeler", args=[campaign.slug, lab.pk])).content.decode()
    assert 'data-labeler-page="lab"' in page and '<span data-submitted>1</span>' in page


def _grow(campaign: Campaign, n: int, labeler) -> None:
    """n solutions of 3 steps with a finished labeling each, inserted in bulk (as an import does: a thousand
    factory rows one by one would be most of the test's time)."""
    problem = ProblemFactory(text=f"bulk problem {n}", answer="1")
    solution_ids = insert_rows(Solution, ["campaign_id", "problem_id", "generation"],
                               [(campaign.pk, problem.pk, i % 3) for i in range(n)])
    step_ids = insert_rows(Step, ["solution_id", "index"], [(s, i) for s in solution_ids for i in range(3)])
    completion_ids = insert_rows(Completion, ["step_id", "index", "text"], [(s, 0, "step") for s in step_ids])
    assignment_ids = insert_rows(
        Assignment, ["solution_id", "labeler_id", "status", "finish_reason"],
        [(s, labeler.pk, AssignmentStatus.SUBMITTED, FinishReason.SOLUTION) for s in solution_ids])
    insert_rows(Rating, ["assignment_id", "completion_id", "rating"],
                [(a, c, 1) for a, cs in zip(assignment_ids, zip(*[iter(completion_ids)] * 3, strict=True), strict=True)
                 for c in cs])
    # as an import does: statistics for the bulk-filled tables, else PostgreSQL may plan the metrics' joins for
    # empty tables (nested loops over sequential scans; seen here: one FETCH running for 13 minutes)
    refresh_planner_statistics(Solution, Step, Completion, Assignment, Rating)


@pytest.mark.django_db
def test_dashboard_query_count_is_flat(client, campaign_factory, member, make_user) -> None:
    small, big = campaign_factory("small"), campaign_factory("big")
    lab = make_user("worker")
    for campaign in (small, big):
        MembershipFactory(campaign=campaign, user=lab)
    _grow(small, 10, lab)
    _grow(big, 1000, lab)
    from annotate.services.agreement import compute_campaign_metrics

    compute_campaign_metrics(small)
    compute_campaign_metrics(big)
    client.force_login(make_user("boss", is_staff=True))
    counts = []
    for campaign in (small, big):
        url = reverse("manage:dashboard", args=[campaign.slug]) + "?fresh=1"  # bypass the progress cache
        client.get(url)  # warm the session
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    with CaptureQueriesContext(connection) as cached:
        client.get(reverse("manage:dashboard", args=[big.slug]))
    assert len(cached) < counts[1]  # the progress aggregates came from the cache
    page = response.content.decode()
    assert "<th data-total>1000</th>" in page and "<th data-in-progress>0</th>" in page
    assert 'data-finish-reason="solution">Every step rated, no error: 1000' in page


@pytest.mark.django_db
def test_dashboard_progress_numbers(client, world, member) -> None:
    campaign, users, solution, _ = world
    second = member(campaign, "lab2")
    finished_labeling(solution, second, [1, 1, 1])           # overlap 2 reached: done
    half = numbered_solution(campaign, 2, generation=1)
    finished_labeling(half, second, [1, 1])                  # 1 of 2: in progress
    numbered_solution(campaign, 2, generation=1)             # untouched: to do
    numbered_solution(campaign, 2, is_quality_control=True, gold_first_error=-1)
    client.force_login(users["staff"])
    page = client.get(reverse("manage:dashboard", args=[campaign.slug])).content.decode()
    assert "<th data-total>4</th>" in page and "<th data-done>1</th>" in page
    assert "<th data-in-progress>1</th>" in page and "<th data-qc>1</th>" in page
    assert "Labelings in the last 24 h: 3" in page


@pytest.mark.django_db
def test_adjudication_review_and_resolved_export(client, world, member) -> None:
    campaign, users, solution, _ = world
    second = member(campaign, "lab2")
    finished_labeling(solution, second, [1, 0, 1])  # lab said [1, 1, -1]: steps 2 and 3 disputed
    client.force_login(users["owner"])
    listing = client.get(reverse("manage:adjudication", args=[campaign.slug])).content.decode()
    assert f'data-disagreement="{solution.pk}"' in listing
    url = reverse("manage:review", args=[campaign.slug, solution.pk])
    page = client.get(url).content.decode()
    assert page.count("data-disagree") == 2
    bad = client.post(url, {"step-1": "7"})
    assert bad.status_code == 400 and "steps[1].rating" in bad.content.decode()
    assert client.post(url, {"step-1": "1", "step-2": "-1", "note-2": "sign error"}).status_code == 302
    assert dict(ResolvedLabel.objects.values_list("step__index", "rating")) == {1: 1, 2: -1}
    assert Rating.objects.filter(assignment__solution=solution).count() == 6  # raw ratings untouched

    raw = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions(include_qc=True)))
    resolved = list(iter_format_rows(campaign, "trl-stepwise", ExportOptions(include_qc=True, labels="resolved")))
    assert sorted(r["ratings"] for r in raw) == [[1, 0, 1], [1, 1, -1]]
    # step 0: both said +1 (unanimous); steps 1, 2: the reviewer's labels
    assert [(r["ratings"], r["assignment_id"]) for r in resolved] == [([1, 1, -1], None)]
    with pytest.raises(ValueError, match="labels"):
        ExportOptions(labels="cooked")
    with pytest.raises(ValueError, match="lossless"):
        list(iter_format_rows(campaign, "prm800k", ExportOptions(labels="resolved")))

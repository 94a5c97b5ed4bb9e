"""The database-specific places of docs/backends.md, one test each, on PostgreSQL here and on SQLite (the
embedded default ``./run demo`` runs on) through ``tests/embedded/test_sqlite_pass.py``."""
from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from annotate.models import (
    RESPLIT_INTO,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    ImportJob,
    LabelingKey,
    LeaseOrder,
    Problem,
    Rating,
    RatingRevision,
    Role,
    Solution,
    StepDecision,
)
from annotate.services import labeling, leases
from annotate.services.campaigns import campaign_progress, create_import_job, run_import_job
from annotate.services.whole_labeling import LabelingInput, StepLabel, apply_labeling
from steplab.jobs import FINAL_STATUSES
from tests.factories import MembershipFactory, solution_with_steps
from tests.labeling_rounds.conftest import hand_pool  # noqa: F401 — a fixture
from tests.waiting import wait_for

pytestmark = pytest.mark.both_databases
GENUINE_ROWS = Path(__file__).resolve().parents[2] / "demo" / "data" / "genuine_rows.jsonl"


def _labeler_in(campaign: Campaign, make_user: Any, username: str = "lena") -> Any:
    user = make_user(username)
    MembershipFactory(campaign=campaign, user=user, role=Role.LABELER)
    return user


@pytest.mark.django_db
def test_healthz_reaches_the_database(client) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200 and answer.json() == {"ok": True}


@pytest.mark.django_db
def test_progress_counts_each_generation_in_one_raw_query(campaign_factory, make_user) -> None:
    """The progress SQL: ``count(*) FILTER``, ``NULLS LAST`` and named parameters, which both databases speak."""
    campaign = campaign_factory("progress", overlap=1)
    done, leased, todo = (solution_with_steps(campaign, ["a", "b"]) for _ in range(3))
    later = solution_with_steps(campaign, ["c"])
    Solution.objects.filter(pk=later.pk).update(generation=2)
    solution_with_steps(campaign, ["q"], is_quality_control=True)
    labeler = make_user("pat")
    now = timezone.now()
    Assignment.objects.create(solution=done, labeler=labeler, status=AssignmentStatus.SUBMITTED,
                              finish_reason="solution", finished_at=now)
    Assignment.objects.create(solution=leased, labeler=labeler, status=AssignmentStatus.LEASED,
                              lease_expires_at=now + timedelta(minutes=5))
    progress = campaign_progress(campaign, now=now)
    assert [(g.generation, g.total, g.todo, g.in_progress, g.done, g.qc) for g in progress.generations] == [
        (2, 1, 1, 0, 0, 0), (None, 4, 1, 1, 1, 1)]
    assert (progress.totals.total, progress.finish_reasons["solution"], progress.labelings_last_24h) == (5, 1, 1)
    assert todo.pk not in {done.pk, leased.pk}


@pytest.mark.django_db
def test_leases_order_by_disagreement_nulls_last_and_skip_resplit_solutions(campaign_factory, make_user) -> None:
    """``select_for_update(skip_locked, of)`` (dropped by Django on SQLite, whose writers queue on the file lock),
    ``nulls_last`` ordering and the ``provenance__has_key`` exclusion, through the lease service."""
    campaign = campaign_factory("order", lease_order=LeaseOrder.DISAGREEMENT_FIRST, overlap=1)
    unscored, low, high, replaced = (solution_with_steps(campaign, ["x"]) for _ in range(4))
    for solution, disagreement in ((low, 0.2), (high, 0.9), (replaced, 1.0)):
        Solution.objects.filter(pk=solution.pk).update(machine_disagreement=disagreement)
    Solution.objects.filter(pk=replaced.pk).update(provenance={RESPLIT_INTO: 1})
    labeler = _labeler_in(campaign, make_user)
    order = []
    for _ in range(4):
        assignment = leases.lease_next_solution(campaign, user=labeler).assignment
        if assignment is None:
            break
        order.append(assignment.solution_id)
        labeling.finish_assignment(assignment.pk, user=labeler, reason="give_up", text="test")
    assert order == [high.pk, low.pk, unscored.pk]


@pytest.mark.django_db
def test_reaping_and_resuming_a_lease(campaign_factory, make_user) -> None:
    """The reaper's ``select_for_update(skip_locked=True)`` and the resume's row locks on this database."""
    campaign = campaign_factory("reap", overlap=1)
    solution = solution_with_steps(campaign, ["x", "y"])
    labeler = _labeler_in(campaign, make_user)
    assignment = leases.lease_next_solution(campaign, user=labeler).assignment
    assert assignment is not None
    labeling.record_rating(assignment.pk, user=labeler, step_index=0, rating=1)
    later = timezone.now() + timedelta(minutes=campaign.lease_minutes + 1)
    assert leases.reap_expired_leases(now=later) == 1
    solution.refresh_from_db()
    assert solution.label_count == 0
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.EXPIRED
    resumed = leases.resume_expired_lease(assignment.pk, user=labeler, now=later)
    assert resumed.status == AssignmentStatus.LEASED
    assert Rating.objects.filter(assignment=assignment).count() == 1


@pytest.mark.django_db
def test_a_replayed_client_key_applies_the_labeling_once(campaign_factory, make_user) -> None:
    """The client key's ``INSERT … ON CONFLICT DO NOTHING RETURNING`` in raw SQL."""
    campaign = campaign_factory("whole", overlap=1)
    solution_with_steps(campaign, ["One.", "Two."])
    labeler = _labeler_in(campaign, make_user)
    assignment = leases.lease_next_solution(campaign, user=labeler).assignment
    assert assignment is not None
    given = LabelingInput(assignment_id=assignment.pk, client_key="key-1",
                          ratings=[StepLabel(step_index=0, rating=1), StepLabel(step_index=1, rating=0)])
    first, again = apply_labeling(given, user=labeler), apply_labeling(given, user=labeler)
    assert (first.replayed, again.replayed) == (False, True)
    assert again.assignment.status == AssignmentStatus.SUBMITTED
    assert list(Rating.objects.filter(assignment=assignment).order_by("rating").values_list("rating", flat=True)) == [
        0, 1]
    assert LabelingKey.objects.filter(user=labeler).count() == 1


@pytest.mark.django_db
def test_changing_a_stepwise_rating_keeps_one_decision_and_a_revision(campaign_factory, make_user) -> None:
    """The step decision's ``bulk_create(ignore_conflicts=True)`` (``ON CONFLICT DO NOTHING``) on each rating."""
    campaign = campaign_factory("decide", mode=CampaignMode.STEPWISE, overlap=1)
    solution_with_steps(campaign, ["One.", "Two."])
    labeler = _labeler_in(campaign, make_user)
    assignment = leases.lease_next_solution(campaign, user=labeler).assignment
    assert assignment is not None
    labeling.record_rating(assignment.pk, user=labeler, step_index=0, rating=1)
    labeling.record_rating(assignment.pk, user=labeler, step_index=0, rating=0)
    assert StepDecision.objects.filter(assignment=assignment).count() == 1
    assert list(RatingRevision.objects.filter(assignment=assignment).values_list("previous_rating", flat=True)) == [1]
    assert Rating.objects.get(assignment=assignment).rating == 0


@pytest.mark.django_db(transaction=True, databases=["default", "job_progress"])
def test_an_uploaded_import_job_runs_to_success(campaign_factory, make_user, settings, tmp_path: Path) -> None:
    """The import job's claim (a PostgreSQL advisory lock; SQLite has one writer at a time) and its progress
    writes through the second connection (PostgreSQL only), committed as a worker would."""
    settings.MEDIA_ROOT = tmp_path / "media"
    campaign = campaign_factory("upload")
    admin = make_user("ada", is_staff=True)
    rows = "".join(json.dumps({"problem": f"What is {n} + {n}?", "answer": str(2 * n)}) + "\n" for n in range(5))
    job = create_import_job(campaign, kind="problems", user=admin,
                            upload=SimpleUploadedFile("problems.jsonl", rows.encode()))
    if run_import_job(job.pk) is None:
        # the suite's Celery worker, when one runs, got the task sent on commit first and holds the job's claim
        wait_for(lambda: ImportJob.objects.filter(pk=job.pk, status__in=FINAL_STATUSES).exists(), timeout=60,
                 what=f"import job {job.pk} run by the worker that claimed it")
    job.refresh_from_db()
    assert (job.status, job.error) == ("succeeded", "")
    assert Problem.objects.filter(campaign=campaign).count() == 5


@pytest.mark.django_db(transaction=True)
def test_prm800k_rows_round_trip_through_the_bulk_writer(tmp_path: Path) -> None:
    """``steplab.bulk``: ids from the sequence (PostgreSQL) or under the write lock (SQLite), COPY or
    executemany, datetimes and JSON converted per database, the import transaction, reads by id arrays."""
    call_command("import_prm800k", str(GENUINE_ROWS), "--campaign", "bulk")
    out = tmp_path / "out.jsonl"
    call_command("export_dataset", "--campaign", "bulk", "--format", "prm800k", "--out", str(out))
    original = [json.loads(line) for line in GENUINE_ROWS.read_text(encoding="utf-8").splitlines()]
    exported = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(exported) == len(original) == 10
    for number, (want, got) in enumerate(zip(original, exported, strict=True), start=1):
        assert got == want, f"row {number} differs after the round trip"


@pytest.mark.django_db
def test_a_snapshot_numbers_versions_and_lists_sources_by_a_json_key(campaign_factory, make_user, settings,
                                                                     tmp_path: Path) -> None:
    """The snapshot's campaign lock (``select_for_update``) and the card's ``GROUP BY provenance->source``."""
    from rewards.services.datasets import create_dataset_version

    settings.MEDIA_ROOT, settings.STEPLAB_EXPORT_TMP_DIR = tmp_path / "media", tmp_path / "tmp"
    campaign = campaign_factory("snap", overlap=1)
    solution = solution_with_steps(campaign, ["One.", "Two."])
    Solution.objects.filter(pk=solution.pk).update(provenance={"source": "unit", "license": "CC0"})
    labeler = _labeler_in(campaign, make_user)
    assignment = leases.lease_next_solution(campaign, user=labeler).assignment
    assert assignment is not None
    apply_labeling(LabelingInput(assignment_id=assignment.pk, client_key="snap",
                                 ratings=[StepLabel(step_index=0, rating=1), StepLabel(step_index=1, rating=1)]),
                   user=labeler)
    version = create_dataset_version(campaign)
    assert version is not None and version.number == 1
    with default_storage.open(version.files["card"]["name"]) as handle:
        card = handle.read().decode()
    assert "* solutions from `unit` (1): CC0" in card


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 — the name http.server calls
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — the base class's parameter name
        """Quiet: the test reads what arrived, not the server's log."""


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A webhook receiver on a free loopback port; yields its URL and the bodies it received."""
    bodies: list[bytes] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies
    server.shutdown()
    server.server_close()


@pytest.mark.django_db(transaction=True)
def test_a_submit_announces_progress_milestones_to_a_hook(campaign_factory, make_user, settings, receiver) -> None:
    """The milestone check after a labeling reads the hooks' JSON ``events`` (no JSON containment on SQLite:
    every submit answered 500 there), then a delivery goes out after its row is claimed."""
    from webhooks.models import Delivery, Event, Webhook
    from webhooks.services import attempt_delivery, check_progress_milestones

    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    # a queue no worker serves: this test sends the delivery itself, so no worker may race it
    settings.STEPLAB_WEBHOOK_QUEUE = f"embedded-test-{os.getpid()}"
    url, bodies = receiver
    campaign = campaign_factory("hooked", overlap=1)
    solution_with_steps(campaign, ["One."])
    hook = Webhook.objects.create(campaign=campaign, url=url, events=[Event.CAMPAIGN_PROGRESS.value], secret="s")
    labeler = _labeler_in(campaign, make_user)
    assignment = leases.lease_next_solution(campaign, user=labeler).assignment
    assert assignment is not None
    labeling.record_rating(assignment.pk, user=labeler, step_index=0, rating=1)
    labeling.submit_assignment(assignment.pk, user=labeler)  # its on-commit check runs at once here (autocommit)
    assert check_progress_milestones(campaign.pk) == [25, 50, 75, 100]
    deliveries = list(Delivery.objects.filter(webhook=hook).order_by("pk"))
    assert [d.payload["data"]["percent_labeled"] for d in deliveries] == [25, 50, 75, 100]
    attempt_delivery(deliveries[-1].pk)
    assert Delivery.objects.get(pk=deliveries[-1].pk).status == Delivery.Status.DELIVERED
    assert json.loads(bodies[-1])["data"]["percent_labeled"] == 100


@pytest.mark.django_db
def test_a_resplit_releases_open_leases_and_a_labeled_solution_gets_a_successor(campaign_factory, make_user) -> None:
    """The re-split's row locks (``select_for_update`` on the solution and its open leases) and the successor's
    ``provenance`` keys, which the lease then reads."""
    from annotate.services.resplit import resplit_solution

    campaign = campaign_factory("resplit", overlap=1)
    solution = solution_with_steps(campaign, ["One. Two.", "Three."])
    admin = make_user("adm", is_staff=True)
    labeler = _labeler_in(campaign, make_user)
    leased = leases.lease_next_solution(campaign, user=labeler).assignment
    assert leased is not None
    in_place = resplit_solution(solution_id=solution.pk, steps=["One.", "Two.", "Three."], user=admin)
    assert (in_place.in_place, in_place.released_leases) == (True, 1)
    assert Assignment.objects.get(pk=leased.pk).status == AssignmentStatus.EXPIRED
    other = _labeler_in(campaign, make_user, "otto")  # a labeler is never handed a solution they had before
    again = leases.lease_next_solution(campaign, user=other).assignment
    assert again is not None and again.solution_id == solution.pk
    labeling.record_rating(again.pk, user=other, step_index=0, rating=1)
    successor = resplit_solution(solution_id=solution.pk, steps=["One. Two. Three."], user=admin)
    assert not successor.in_place
    assert Solution.objects.get(pk=solution.pk).provenance[RESPLIT_INTO] == successor.solution.pk
    assert successor.solution.provenance["resplit_from"] == solution.pk


@pytest.mark.django_db
def test_an_invitation_is_answered_under_its_row_lock(campaign_factory, make_user) -> None:
    """Adding a member and accepting lock the membership and the invitation (``select_for_update``)."""
    from annotate.models import Invitation, Membership
    from annotate.services.campaigns import add_member, answer_invitation

    campaign = campaign_factory("invite")
    guest = make_user("guest")
    add_member(campaign, "guest", Role.RESEARCHER)
    invitation = Invitation.objects.get(campaign=campaign, user=guest)
    membership = answer_invitation(user=guest, invitation_id=invitation.pk, accept=True)
    assert membership is not None and membership.role == Role.RESEARCHER
    assert add_member(campaign, "guest", Role.ADMIN) == "guest is now admin."
    assert Membership.objects.get(campaign=campaign, user=guest).role == Role.ADMIN
    assert not Invitation.objects.filter(user=guest).exists()


@pytest.mark.django_db
def test_a_labeling_round_locks_fills_and_counts_by_provenance_keys(hand_pool, make_user) -> None:  # noqa: F811 — the fixture imported above
    """Starting and completing a labeling round (``select_for_update`` on the campaign, the round and its open
    candidates; the solutions through ``steplab.bulk.bulk_insert``), then the dashboard's per-round counts,
    filtered on ``provenance__source`` / ``provenance__reason`` (JSON keys)."""
    from rewards.jobs.selectors import labeling_round_rows

    first = hand_pool.run("convincing_wrong", 2)
    assert (first.status, first.selected_count) == ("completed", 2)
    chosen = list(Solution.objects.filter(campaign=hand_pool.campaign, generation=1).order_by("pk"))
    assert [s.provenance["reason"] for s in chosen] == ["convincing_wrong"] * 2
    labeler = _labeler_in(hand_pool.campaign, make_user)
    for _ in chosen:
        assignment = leases.lease_next_solution(hand_pool.campaign, user=labeler).assignment
        assert assignment is not None
        labeling.record_rating(assignment.pk, user=labeler, step_index=0, rating=-1)
        labeling.submit_assignment(assignment.pk, user=labeler)
    [row] = labeling_round_rows(hand_pool.campaign)
    assert (row["selected"], row["labeled"], row["convincing_wrong_labeled"], row["found_error"]) == (2, 2, 2, 2), row

"""Problems are owned by one campaign: what campaign B's admin uploads (the browser import page, run by the real
Celery worker) or sends through the API never changes, reveals or confirms the existence of campaign A's
problems. Each assertion failed when problems were shared by every campaign."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import ImportJob, Problem, Role, Solution
from api.services import create_token
from steplab.jobs import JobStatus
from tests.factories import CampaignFactory, MembershipFactory
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = {"problem": "What is the secret number of campaign A?", "answer": "4242", "unique_id": "a/secret.json",
          "solution": "A's worked solution."}
PUBLIC = {"problem": "What is $2+2$?", "answer": "4", "unique_id": "shared/two.json"}


def _jsonl(rows: list[Any]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def _upload(client, slug: str, kind: str, rows: list[Any]) -> ImportJob:
    response = client.post(reverse("manage:imports", args=[slug]),
                           {"kind": kind, "file": SimpleUploadedFile(f"{kind}.jsonl", _jsonl(rows))})
    assert response.status_code == 302, response.content.decode()[:500]
    job_id = ImportJob.objects.latest("id").pk
    return wait_for(lambda: (job := ImportJob.objects.get(pk=job_id)).is_finished and job, timeout=60, every=0.2,
                    what=f"import job {job_id} to finish")


def _api(user) -> APIClient:
    _, raw = create_token(user, name="script", scope="write")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def write(tmp_path):
    names = iter(range(1000))

    def make(rows: list[Any]) -> str:
        path = tmp_path / f"rows{next(names)}.jsonl"
        path.write_bytes(_jsonl(rows))
        return str(path)

    return make


@pytest.fixture
def two_campaigns(client, make_user):
    a, b = CampaignFactory(slug="a", name="A"), CampaignFactory(slug="b", name="B")
    admins = {}
    for campaign in (a, b):
        admins[campaign.slug] = make_user(f"admin-{campaign.slug}")
        MembershipFactory(campaign=campaign, user=admins[campaign.slug], role=Role.ADMIN)
    return a, b, admins


def test_b_admin_uploads_never_touch_a_problems(client, celery_worker_process, two_campaigns) -> None:
    a, b, admins = two_campaigns
    client.force_login(admins["a"])
    job = _upload(client, "a", "problems", [SECRET, PUBLIC])
    assert job.status == JobStatus.SUCCEEDED, job.error
    a_secret = Problem.objects.get(campaign=a, source_id=SECRET["unique_id"])

    # B's admin sends A's unique_id and A's text with other answers: B gets its own rows, A's stay as they were.
    client.force_login(admins["b"])
    hostile = [{**SECRET, "answer": "0", "solution": "overwritten"}, {**PUBLIC, "unique_id": "", "answer": "5"}]
    job = _upload(client, "b", "problems", hostile)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.created["problems"] == 2 and job.created["updated"] == 0
    a_secret.refresh_from_db()
    assert (a_secret.answer, a_secret.solution) == ("4242", "A's worked solution.")
    assert Problem.objects.get(campaign=a, source_id=PUBLIC["unique_id"]).answer == "4"
    assert set(Problem.objects.filter(campaign=b).values_list("answer", flat=True)) == {"0", "5"}

    # A solution row naming a problem only A has is "unknown", word for word like one that does not exist.
    Problem.objects.filter(campaign=b, source_id=SECRET["unique_id"]).delete()
    job = _upload(client, "b", "solutions", [{"problem_id": SECRET["unique_id"], "solution": "x"},
                                             {"problem_id": "a/nowhere.json", "solution": "x"}])
    assert job.status == JobStatus.FAILED
    messages = [r["message"].replace(SECRET["unique_id"], "ID").replace("a/nowhere.json", "ID") for r in job.rejected]
    assert len(messages) == 2 and messages[0] == messages[1] and "not a known problem" in messages[0]
    assert not Solution.objects.filter(campaign=b).exists()


def test_b_api_never_reads_a_problems(two_campaigns, write) -> None:
    a, b, admins = two_campaigns
    call_command("import_problems", "--campaign", "a", write([SECRET]))
    secret = Problem.objects.get(campaign=a)
    api = _api(admins["b"])
    upload = write([{"problem_id": SECRET["unique_id"], "solution": "We guess.\n\n# Answer\n\n1"},
                        {"problem": SECRET["problem"], "solution": "We guess.\n\n# Answer\n\n1"}])
    with open(upload, "rb") as handle:
        refused = api.post(f"/api/campaigns/{b.pk}/import-solutions/", {"file": handle}, format="multipart")
    assert refused.status_code == 400
    assert [r["field"] for r in refused.json()["rejected"]] == ["problem_id", "problem"]
    assert "4242" not in refused.content.decode() and not Solution.objects.exists()
    listed = api.get("/api/problems/").json()
    assert listed["results"] == [] if isinstance(listed, dict) else listed == []
    assert api.get(f"/api/problems/{secret.pk}/").status_code == 404
    assert api.get(f"/api/problems/?campaign={a.pk}").status_code in (200, 400, 403)
    assert "4242" not in api.get(f"/api/problems/?campaign={a.pk}").content.decode()
    own = _api(admins["a"]).get("/api/problems/").json()
    assert "4242" in json.dumps(own)


def test_the_staff_bank_is_copied_into_a_campaign_on_first_use(two_campaigns, write) -> None:
    a, b, _ = two_campaigns
    call_command("import_problems", write([PUBLIC]))  # no --campaign: the staff bank
    bank = Problem.objects.get(campaign__isnull=True)
    rows = [{"problem_id": PUBLIC["unique_id"], "solution": "So $\\boxed{4}$."}]
    call_command("import_solutions", write(rows), "--campaign", "a")
    call_command("import_solutions", write(rows), "--campaign", "b")
    copies = {s.campaign_id: s.problem for s in Solution.objects.select_related("problem")}
    assert set(copies) == {a.pk, b.pk} and len({p.pk for p in copies.values()} | {bank.pk}) == 3
    assert all(p.campaign_id == campaign for campaign, p in copies.items())
    assert all(s.is_correct for s in Solution.objects.all())
    # A later change in A's copy is A's only.
    call_command("import_problems", "--campaign", "a", write([{**PUBLIC, "answer": "5"}]))
    assert list(Solution.objects.order_by("campaign__slug").values_list("is_correct", flat=True)) == [False, True]


def test_only_staff_and_commands_reach_the_staff_bank(two_campaigns, write, make_user) -> None:
    """A campaign admin who guesses a bank problem's unique_id gets "not a known problem" through the API (and the
    bank's answer stays out of the campaign); the same file imported by staff copies the problem in."""
    a, _, admins = two_campaigns
    call_command("import_problems", write([SECRET]))  # the staff bank
    rows = _jsonl([{"problem_id": SECRET["unique_id"], "solution": "So $\\boxed{4242}$."}])
    url = f"/api/campaigns/{a.pk}/import-solutions/"
    guessed = _api(admins["a"]).post(url, {"file": SimpleUploadedFile("s.jsonl", rows)}, format="multipart")
    assert guessed.status_code == 400
    assert "is not a known problem of this campaign" in json.dumps(guessed.json())
    assert not Problem.objects.filter(campaign=a).exists() and not Solution.objects.exists()
    staff = make_user("staff-importer")
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    by_staff = _api(staff).post(url, {"file": SimpleUploadedFile("s.jsonl", rows)}, format="multipart")
    assert by_staff.status_code == 201, by_staff.content
    assert Problem.objects.get(campaign=a).answer == "4242"

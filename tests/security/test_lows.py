"""The probe's small findings, each answered with a clear 4xx (or imported as it is) instead of a 500."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import Resolver404, resolve, reverse

from annotate.models import Problem, Role
from tests.factories import CandidatePoolFactory, MembershipFactory, UserFactory

HUGE = "99999999999999999999999"  # past a signed 64-bit id: SQLite raised OverflowError on it


def test_ids_past_the_database_range_match_no_route() -> None:
    """Every ``<id:…>`` route: a number the id columns cannot hold is no route (a 404), never a database query."""
    for path in (f"/manage/c/a/members/{HUGE}/", f"/manage/c/a/members/{HUGE}/state",
                 f"/manage/c/a/imports/{HUGE}/", f"/assignments/{HUGE}/", f"/models/jobs/{HUGE}/",
                 f"/api/campaigns/{HUGE}/sampling/", f"/api/tokens/{HUGE}/revoke/",
                 "/manage/c/a/members/9223372036854775808/"):
        with pytest.raises(Resolver404):
            resolve(path)
    assert resolve("/manage/c/a/members/9223372036854775807/").kwargs["user_id"] == 2**63 - 1


def _admin_client(campaign, username: str) -> Client:
    """A client signed in as a new admin of ``campaign``."""
    admin = UserFactory(username=username)
    MembershipFactory(campaign=campaign, user=admin, role=Role.ADMIN)
    client = Client()
    client.force_login(admin)
    return client


@pytest.mark.django_db
@pytest.mark.both_databases
def test_a_member_page_past_the_id_range_is_a_404(campaign_factory) -> None:
    client = _admin_client(campaign_factory("lows"), "lows-admin")
    for method, path in (("get", f"/manage/c/lows/members/{HUGE}/"), ("post", f"/manage/c/lows/members/{HUGE}/"),
                         ("post", f"/manage/c/lows/members/{HUGE}/state"),
                         ("get", f"/manage/c/lows/members/{2**63}/")):
        assert getattr(client, method)(path, {"action": "pause"}).status_code == 404, (method, path)


@pytest.mark.django_db
@pytest.mark.both_databases
def test_an_invitation_id_that_is_no_ascii_number_is_a_clear_refusal(campaign_factory) -> None:
    campaign_factory("lows")
    client = Client()
    client.force_login(UserFactory(username="invitee"))
    for value in ("\u00b2", "\u0663", "1\u00b2", HUGE, "-1", ""):
        response = client.post(reverse("annotate:invitations"), {"invitation": value, "answer": "accept"})
        assert response.status_code == 404, (value, response.status_code)
        assert "invitation" in response.content.decode(), value


@pytest.mark.django_db
def test_a_score_form_with_a_superscript_model_id_is_no_500(campaign_factory) -> None:
    campaign = campaign_factory("lows")
    client = _admin_client(campaign, "lows-manager")
    pool = CandidatePoolFactory(campaign=campaign)
    response = client.post(reverse("jobs:score_start", kwargs={"slug": "lows"}),
                           {"pool": str(pool.pk), "models": ["\u00b2", HUGE]})
    assert response.status_code == 400, response.status_code  # the form again, its error by the models field


@pytest.mark.django_db
def test_mmlu_pro_single_option_questions_import_as_they_are(shared_data: Path, tmp_path: Path,
                                                              campaign_factory) -> None:
    """Five of MMLU-Pro's 12,032 questions have one option (answer A): the whole file's rows import unchanged."""
    rows = [json.loads(line) for line in (shared_data / "mmlu-pro" / "questions.jsonl").open(encoding="utf-8")]
    single = [row for row in rows if len(row["options"]) == 1]
    assert len(single) == 5
    path = tmp_path / "single.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in single), encoding="utf-8")
    campaign = campaign_factory("mmlu-single")
    call_command("import_problems", str(path), "--campaign", campaign.slug)
    imported = {p.source_id: p for p in Problem.objects.filter(campaign=campaign)}
    assert len(imported) == 5
    for row in single:
        problem = imported[str(row["question_id"])]
        assert problem.options == row["options"] and problem.answer == "A"

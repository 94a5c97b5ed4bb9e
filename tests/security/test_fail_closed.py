"""One enforcement layer that fails closed: services act for an explicit actor (a user or ``permissions.SYSTEM``);
a forgotten user (``None``) is refused, never taken for the system; the staff problem bank is closed unless the
entry point says who it acts for; webhook registration and the API's solutions import meet the page's rules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from annotate import permissions
from annotate.models import ImportJob, Problem, Role, Solution
from annotate.permissions import SYSTEM, NotAllowed
from annotate.services import campaigns
from annotate.services.campaign_problems import bank_access, resolve_problems
from annotate.services.problems import import_solutions
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

BANKED = {"problem": "What is 6 times 7 in the bank?", "answer": "42", "unique_id": "bank/42"}
GUESS = {"problem_id": "bank/42", "solution": "Six sevens.\n\n# Answer\n\n42"}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def banked(tmp_path: Path) -> Path:
    """A problem in the staff bank (imported by a command) and a solutions file that names it by id."""
    call_command("import_problems", str(_jsonl(tmp_path / "bank.jsonl", [BANKED])))
    assert Problem.objects.filter(campaign__isnull=True, source_id="bank/42").exists()
    return _jsonl(tmp_path / "solutions.jsonl", [GUESS])


def test_a_forgotten_user_is_refused_and_the_system_is_explicit(campaign_factory) -> None:
    campaign = campaign_factory("fc")
    with pytest.raises(NotAllowed):
        permissions.require(permissions.can_manage, None, campaign, "refused")
    permissions.require(permissions.can_manage, SYSTEM, campaign, "the system may")
    assert permissions.account_of(SYSTEM) is None and repr(SYSTEM) == "SYSTEM"
    # a later stage of work whose starter was deleted acts as nobody, and is refused
    with pytest.raises(NotAllowed):
        permissions.require(permissions.can_manage, permissions.actor_for(None), campaign, "refused")


def test_guarded_services_take_the_actor_without_a_default(campaign_factory) -> None:
    """Leaving the user out is a call error, not a call with the system's authority."""
    from rewards.jobs.services import comparisons, sampling
    from webhooks.services import register_webhook

    campaign = campaign_factory("fc")
    with pytest.raises(TypeError, match="user"):
        sampling.start_sampling_job(campaign, config={})
    with pytest.raises(TypeError, match="user"):
        comparisons.snapshot_labels(campaign)
    with pytest.raises(TypeError, match="user"):
        register_webhook(campaign=campaign, url="https://example.org/hook", events=["job.finished"])


def test_only_active_staff_and_the_system_reach_the_problem_bank() -> None:
    staff = UserFactory(username="staff-active", is_staff=True)
    retired = UserFactory(username="staff-retired", is_staff=True, is_active=False)
    plain = UserFactory(username="plain")
    assert permissions.can_reference_problem_bank(SYSTEM) and permissions.can_reference_problem_bank(staff)
    assert not permissions.can_reference_problem_bank(None)
    assert not permissions.can_reference_problem_bank(retired)  # raw is_staff, without the active check
    assert not permissions.can_reference_problem_bank(plain)
    assert not permissions.can_reference_problem_bank(AnonymousUser())


def test_the_bank_is_closed_unless_an_entry_point_opens_it(banked: Path, campaign_factory) -> None:
    campaign = campaign_factory("fc")
    by_source, _ = resolve_problems(campaign, source_ids=["bank/42"])
    assert by_source == {} and not Problem.objects.filter(campaign=campaign).exists()
    with bank_access(None):  # a forgotten actor
        assert resolve_problems(campaign, source_ids=["bank/42"])[0] == {}
    with bank_access(SYSTEM):
        assert resolve_problems(campaign, source_ids=["bank/42"])[0]["bank/42"].campaign_id == campaign.pk


def test_an_import_outside_any_entry_point_does_not_copy_the_bank(banked: Path, campaign_factory) -> None:
    from annotate.services.importing import ImportFailed

    campaign = campaign_factory("fc")
    with pytest.raises(ImportFailed) as failed:
        import_solutions(banked, campaign)
    assert "is not a known problem of this campaign" in str(failed.value.report.rejected[0])
    assert not Problem.objects.filter(campaign=campaign).exists()
    call_command("import_solutions", str(banked), "--campaign", "fc")  # a command acts as the system
    assert Solution.objects.filter(campaign=campaign).count() == 1


@pytest.mark.django_db(transaction=True, databases=["default", "job_progress"])  # the job's progress connection
def test_an_upload_whose_uploader_was_deleted_does_not_reach_the_bank(banked: Path, campaign_factory,
                                                                      settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    campaign = campaign_factory("fc")
    staff = UserFactory(username="staff-uploader", is_staff=True)
    job = campaigns.create_import_job(campaign, kind="solutions", user=staff,
                                      upload=SimpleUploadedFile("s.jsonl", banked.read_bytes()))
    staff.delete()  # created_by is now NULL: that is nobody, not the system
    finished = campaigns.run_import_job(job.pk)
    assert finished is not None and finished.status == "failed"
    assert "not a known problem" in json.dumps(ImportJob.objects.get(pk=job.pk).rejected)
    assert not Problem.objects.filter(campaign=campaign).exists()


def test_register_webhook_meets_the_page_rule(campaign_factory) -> None:
    from webhooks.models import Webhook
    from webhooks.services import register_webhook

    campaign = campaign_factory("fc")
    for role in (Role.LABELER, Role.RESEARCHER):
        member = UserFactory(username=f"hooker-{role}")
        MembershipFactory(campaign=campaign, user=member, role=role)
        with pytest.raises(NotAllowed):
            register_webhook(campaign=campaign, url="https://example.org/hook", events=["job.finished"], user=member)
    outsider = UserFactory(username="hooker-outside")
    with pytest.raises(NotAllowed):
        register_webhook(campaign=campaign, url="https://example.org/hook", events=["job.finished"], user=outsider)
    assert not Webhook.objects.exists()


def test_the_api_import_acts_for_its_user(banked: Path, campaign_factory) -> None:
    """The API's import goes through the service that checks ``can_import`` and opens the bank for the user only:
    a campaign admin's guess is refused, active staff's reference copies the problem in."""
    campaign = campaign_factory("fc")
    admin = UserFactory(username="fc-admin")
    MembershipFactory(campaign=campaign, user=admin, role=Role.ADMIN)
    url = f"/api/campaigns/{campaign.pk}/import-solutions/"
    client = APIClient()
    client.force_login(admin)
    refused = client.post(url, {"file": SimpleUploadedFile("s.jsonl", banked.read_bytes())}, format="multipart")
    assert refused.status_code == 400 and "is not a known problem" in refused.content.decode()
    with pytest.raises(NotAllowed):
        campaigns.import_solutions_now(campaign, path=banked, user=UserFactory(username="nobody-here"))
    with pytest.raises(NotAllowed):
        campaigns.import_solutions_now(campaign, path=banked, user=None)
    staff = UserFactory(username="fc-staff", is_staff=True)
    client.force_login(staff)
    copied = client.post(url, {"file": SimpleUploadedFile("s.jsonl", banked.read_bytes())}, format="multipart")
    assert copied.status_code == 201, copied.content
    assert Problem.objects.get(campaign=campaign).answer == "42"

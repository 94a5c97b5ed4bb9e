"""Members join by invitation: an admin's "add" answers alike for unknown and existing names and makes nobody
(staff neither) a member until they accept; another campaign's reward models are as missing as unknown ones."""
from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotate.models import Invitation, Membership, Role
from rewards.jobs.models import JobStatus, RewardModel, TrainingJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(personas, campaign_factory):
    campaign = campaign_factory("club", name="Club")
    people = personas(campaign)
    client = Client()
    client.force_login(people.owner)
    return campaign, people, client


def _add(client: Client, campaign, username: str, role: str = "labeler") -> str:
    response = client.post(reverse("manage:members", args=[campaign.slug]), {"username": username, "role": role},
                           follow=True)
    assert response.status_code == 200
    return response.content.decode().replace(username, "NAME")


@pytest.mark.parametrize("who", ["outsider", "staff"])
def test_adding_a_name_answers_alike_whether_the_account_exists(admin_client, make_user, who) -> None:
    campaign, people, client = admin_client
    existing = getattr(people, who)
    said_existing = _add(client, campaign, existing.username)
    said_unknown = _add(client, campaign, "nobody-has-this-name")
    assert "has been invited" in said_existing
    message = [line for line in said_existing.splitlines() if "has been invited" in line]
    assert message and all(line in said_unknown for line in message)
    assert "no user named" not in said_unknown
    assert not Membership.objects.filter(campaign=campaign, user=existing).exists()  # not without consent


def test_the_invited_user_accepts_or_declines_and_nobody_else_can(admin_client, make_user) -> None:
    campaign, people, client = admin_client
    guest, other = make_user("guest"), make_user("other")
    _add(client, campaign, "guest", "researcher")
    _add(client, campaign, "other")
    invitation = Invitation.objects.get(user=guest)
    stranger = Client()
    stranger.force_login(other)
    refused = stranger.post(reverse("annotate:invitations"), {"invitation": invitation.pk, "answer": "accept"})
    assert refused.status_code == 404 and not Membership.objects.filter(user=other, campaign=campaign).exists()
    invited = Client()
    invited.force_login(guest)
    page = invited.get(reverse("annotate:invitations")).content.decode()
    assert f'data-invitation="{invitation.pk}"' in page and "Club" in page
    assert invited.get(reverse("annotate:home")).status_code == 200
    invited.post(reverse("annotate:invitations"), {"invitation": invitation.pk, "answer": "accept"})
    assert Membership.objects.get(user=guest, campaign=campaign).role == Role.RESEARCHER
    assert not Invitation.objects.filter(user=guest).exists()
    declined = Invitation.objects.get(user=other)
    stranger.post(reverse("annotate:invitations"), {"invitation": declined.pk, "answer": "decline"})
    assert not Invitation.objects.filter(pk=declined.pk).exists()
    assert not Membership.objects.filter(user=other, campaign=campaign).exists()
    bogus = invited.post(reverse("annotate:invitations"), {"invitation": "9" * 30, "answer": "accept"})
    assert bogus.status_code == 404


def test_an_existing_member_changes_role_at_once(admin_client) -> None:
    campaign, people, client = admin_client
    assert "is now researcher" in _add(client, campaign, people.labeler.username, "researcher")
    assert Membership.objects.get(user=people.labeler, campaign=campaign).role == Role.RESEARCHER


def test_machine_labeling_names_no_other_campaigns_model(admin_client, campaign_factory) -> None:
    campaign, people, client = admin_client
    elsewhere = campaign_factory("secret", name="Secret")
    job = TrainingJob.objects.create(kind="prm", campaign=elsewhere, dataset_path="/x", status=JobStatus.SUCCEEDED)
    theirs = RewardModel.objects.create(job=job, kind="prm", campaign=elsewhere, name="secret-prm-name",
                                        location="/m", base_model="default")
    answers = []
    for pk in (theirs.pk, theirs.pk + 1000):
        api = client.post(f"/api/campaigns/{campaign.pk}/machine-labeling/",
                          json.dumps({"method": "prm", "reward_model": pk}), content_type="application/json")
        page = client.post(reverse("jobs:machine_labels_start", args=[campaign.slug]),
                           {"method": "prm", "reward_model": pk, "solutions": 1})
        assert api.status_code == 400 and page.status_code == 400
        assert "secret" not in api.content.decode() and "secret-prm-name" not in page.content.decode()
        answers.append(api.json()["reward_model"][0].replace(str(pk), "N"))
    assert answers[0] == answers[1]

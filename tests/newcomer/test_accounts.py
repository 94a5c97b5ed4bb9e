"""An admin makes an account for a newcomer from the campaign's members page: user name, optional e-mail, a chosen
password or a generated one shown once; the account is a member at once and signs in. Refusals name the field;
only the campaign's admins and staff may do it, on the page and in the service."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotate.models import Membership, Role
from annotate.permissions import NotAllowed
from annotate.services.accounts import create_member_account
from annotate.services.campaigns import CampaignAdminError
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def _post(client, campaign, **fields):
    return client.post(reverse("manage:members", args=[campaign.slug]), {"form": "account", **fields})


def test_an_admin_creates_an_account_that_is_a_member_and_signs_in(client, personas, campaign_factory) -> None:
    people = personas(campaign_factory("accounts"))
    campaign = people.campaign
    client.force_login(people.owner)
    page = client.get(reverse("manage:members", args=[campaign.slug])).content.decode()
    assert "data-new-account" in page and 'name="password"' in page and 'name="email"' in page

    made = _post(client, campaign, username="newcomer", email="", role="labeler", password="")
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    body = made.content.decode()
    password = re.search(r"<code data-generated-password>([^<]+)</code>", body).group(1)
    assert len(password) >= 16
    user = get_user_model().objects.get(username="newcomer")
    assert password not in user.password and user.check_password(password) and user.is_active
    assert Membership.objects.get(campaign=campaign, user=user).role == Role.LABELER
    assert 'data-member="newcomer"' in body
    # Shown once: the members page never shows it again.
    assert password not in client.get(reverse("manage:members", args=[campaign.slug])).content.decode()
    client.logout()
    assert client.login(username="newcomer", password=password)
    assert client.get(reverse("annotate:campaign", args=[campaign.slug])).status_code == 200

    client.force_login(people.owner)
    chosen = _post(client, campaign, username="chosen", email="chosen@example.org", role="researcher",
                   password="a-Long-enough-1")
    assert chosen.status_code == 200 and "data-generated-password" not in chosen.content.decode()
    researcher = get_user_model().objects.get(username="chosen")
    assert researcher.email == "chosen@example.org" and researcher.check_password("a-Long-enough-1")
    assert Membership.objects.get(campaign=campaign, user=researcher).role == Role.RESEARCHER


@pytest.mark.parametrize("fields, field, words", [
    ({"username": "NEWCOMER"}, "username", "is taken"),
    ({"username": "has space"}, "username", "Enter a valid username"),
    ({"username": "x", "email": "not-an-address"}, "email", "is not an e-mail address"),
    ({"username": "x", "password": "123"}, "password", "too short"),
    ({"username": "x", "role": "boss"}, "role", "role must be labeler, admin or researcher"),
])
def test_bad_input_is_a_400_naming_the_field_and_makes_nothing(client, personas, campaign_factory, make_user,
                                                               fields, field, words) -> None:
    people = personas(campaign_factory("accounts-bad"))
    make_user("newcomer")
    before = get_user_model().objects.count()
    client.force_login(people.owner)
    refused = _post(client, people.campaign, **{"role": "labeler", "email": "", "password": "", **fields})
    assert refused.status_code == 400
    assert re.search(rf'data-field-error="{field}">[^<]*{re.escape(words)}', refused.content.decode())
    assert get_user_model().objects.count() == before


def test_only_the_campaigns_admins_and_staff_create_accounts(client, personas, campaign_factory) -> None:
    people = personas(campaign_factory("accounts-who"))
    campaign = people.campaign
    for who, status in (("researcher", 403), ("labeler", 403), ("other_admin", 403), ("outsider", 403)):
        client.force_login(getattr(people, who))
        assert _post(client, campaign, username=f"by-{who}", role="admin").status_code in (status, 404), who
    assert not get_user_model().objects.filter(username__startswith="by-").exists()
    with pytest.raises(NotAllowed):
        create_member_account(campaign, username="sneaky", role="admin", created_by=people.researcher)
    client.force_login(people.staff)
    assert _post(client, campaign, username="by-staff", role="admin").status_code == 200
    made = create_member_account(campaign, username="by-service", role="labeler", created_by=people.owner,
                                 password=PASSWORD)
    assert made.generated_password == "" and made.membership.campaign == campaign
    with pytest.raises(CampaignAdminError) as taken:
        create_member_account(campaign, username="By-Service", role="labeler", created_by=people.owner)
    assert taken.value.field == "username"

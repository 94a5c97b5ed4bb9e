"""The campaign's webhooks page: its admins register receivers (secret shown once, private addresses refused)
and read the delivery log; nobody else gets in."""
from __future__ import annotations

import pytest
from django.test import Client

from annotate.models import Role
from annotate.permissions import SYSTEM
from tests.factories import PASSWORD
from webhooks.models import Delivery, Event, Webhook
from webhooks.services import register_webhook

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_admins_register_and_read_the_log_others_are_refused(campaign_factory, member, settings) -> None:
    campaign = campaign_factory("hooks")
    admin = member(campaign, "owner", Role.ADMIN)
    url = f"/manage/c/{campaign.slug}/webhooks/"
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    refused = _client(admin).post(url, {"url": "http://10.0.0.7/hook", "events": [Event.JOB_FINISHED]})
    assert refused.status_code == 400 and b"private, loopback or link-local" in refused.content
    assert not Webhook.objects.exists()
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["10.0.0.7"]
    added = _client(admin).post(url, {"url": "http://10.0.0.7/hook", "events": [Event.JOB_FINISHED,
                                                                                Event.CAMPAIGN_PROGRESS]})
    hook = Webhook.objects.get()
    assert added.status_code == 200 and hook.secret.encode() in added.content
    assert hook.events == [Event.JOB_FINISHED, Event.CAMPAIGN_PROGRESS] and hook.created_by == admin
    Delivery.objects.create(webhook=hook, event=Event.JOB_FINISHED, payload={}, status=Delivery.Status.FAILED,
                            attempts=8, last_status_code=503, last_error="HTTP 503: down")
    page = _client(admin).get(url)
    assert page.status_code == 200 and hook.secret.encode() not in page.content
    assert b'data-status="failed"' in page.content and b"HTTP 503: down" in page.content
    other, _ = register_webhook(campaign=campaign_factory("elsewhere"), url="http://10.0.0.7/x",
                                events=[Event.JOB_FAILED], user=SYSTEM)
    assert other.url.encode() not in page.content  # another campaign's hooks stay out
    for role in (Role.LABELER, Role.RESEARCHER):
        assert _client(member(campaign, f"as-{role}", role)).get(url).status_code == 403

"""Webhooks: receivers on private addresses are refused at registration; events go out after the commit that
caused them; deliveries run in a real Celery worker, signed (HMAC-SHA256), and a failed one is retried with
backoff until the receiver answers or the attempts run out. The receiver is a local HTTP server the test starts
on 127.0.0.1 (allowed through STEPLAB_WEBHOOK_ALLOWED_HOSTS)."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from django.db import transaction

from annotate.models import ImportJob, Membership, Role
from annotate.permissions import SYSTEM
from annotate.services import leases
from annotate.services.whole_labeling import LabelingInput, StepLabel, apply_labeling
from steplab import events
from steplab.jobs import JobStatus, finish
from tests.factories import numbered_solution
from tests.local_http import QuietHandler, serve
from tests.waiting import wait_for
from webhooks.models import Delivery, Event, ProgressMilestone, Webhook
from webhooks.services import SIGNATURE_HEADER, WebhookRefused, register_webhook


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://localhost/hook", "http://10.1.2.3/hook",
                                 "http://169.254.169.254/latest/meta-data", "http://[::1]/hook",
                                 "http://192.168.0.10/hook"])
def test_a_receiver_on_a_private_address_is_refused(campaign_factory, settings, url: str) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(WebhookRefused, match="private, loopback or link-local") as refused:
        register_webhook(campaign=campaign_factory(), url=url, events=[Event.JOB_FINISHED], user=SYSTEM)
    assert refused.value.field == "url" and not Webhook.objects.exists()


@pytest.mark.django_db
def test_the_allow_list_admits_a_named_host_and_events_are_checked(campaign_factory, settings) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    campaign = campaign_factory()
    hook, secret = register_webhook(campaign=campaign, url="http://127.0.0.1:9/hook", events=[Event.JOB_FAILED],
        user=SYSTEM)
    assert secret.startswith("whsec_") and hook.secret == secret
    with pytest.raises(WebhookRefused, match="Unknown event") as refused:
        register_webhook(campaign=campaign, url="http://127.0.0.1:9/hook", events=["job.exploded"], user=SYSTEM)
    assert refused.value.field == "events"
    with pytest.raises(WebhookRefused, match="not an http"):
        register_webhook(campaign=campaign, url="ftp://127.0.0.1/x", events=[Event.JOB_FAILED], user=SYSTEM)


@pytest.mark.django_db
def test_the_admin_refuses_a_private_address_and_shows_the_secret_once(campaign_factory, make_user, settings) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = []
    campaign = campaign_factory()
    staff = make_user("root", is_staff=True, is_superuser=True)
    from django.test import Client

    client = Client()
    client.force_login(staff)
    form = {"campaign": campaign.pk, "url": "http://127.0.0.1:8000/hook", "events": [Event.JOB_FAILED],
            "is_active": "on", "deliveries-TOTAL_FORMS": "0", "deliveries-INITIAL_FORMS": "0"}
    refused = client.post("/admin/webhooks/webhook/add/", form)
    assert refused.status_code == 200 and b"private, loopback or link-local" in refused.content
    assert not Webhook.objects.exists()
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    added = client.post("/admin/webhooks/webhook/add/", form, follow=True)
    hook = Webhook.objects.get()
    assert hook.secret.encode() in added.content  # shown now ...
    assert hook.secret.encode() not in client.get(f"/admin/webhooks/webhook/{hook.pk}/change/").content  # only now


@pytest.mark.django_db
def test_events_go_out_after_the_commit_only(campaign_factory, settings, django_capture_on_commit_callbacks) -> None:
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    campaign = campaign_factory()
    register_webhook(campaign=campaign, url="http://127.0.0.1:9/hook", events=[Event.JOB_FAILED], user=SYSTEM)
    job = ImportJob.objects.create(campaign=campaign, kind="solutions", file="imports/x.jsonl", original_name="x")
    with pytest.raises(RuntimeError), transaction.atomic():
        finish(job, JobStatus.FAILED, error="broken line 3")
        raise RuntimeError("rolled back")
    assert not Delivery.objects.exists()
    job.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        finish(job, JobStatus.FAILED, error="broken line 3")
    delivery = Delivery.objects.get()
    assert delivery.event == Event.JOB_FAILED and delivery.payload["data"]["job"] == job.pk
    assert delivery.payload["data"]["error"] == "broken line 3" and delivery.status == Delivery.Status.PENDING


@pytest.mark.django_db
def test_each_domain_event_a_receiver_subscribes_to_becomes_its_delivery(campaign_factory, settings,
                                                                         django_capture_on_commit_callbacks) -> None:
    """The apps announce through ``steplab.events`` and never import the webhooks; the webhooks' subscriber turns
    every campaign event a receiver can choose into a delivery (progress milestones it makes itself)."""
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    campaign = campaign_factory()
    mirrored = [name for name in events.Name if name.value in Event.values]
    assert set(Event.values) - set(mirrored) == {Event.CAMPAIGN_PROGRESS.value}
    register_webhook(campaign=campaign, url="http://127.0.0.1:9/hook", events=list(Event.values), user=SYSTEM)
    with pytest.raises(RuntimeError), transaction.atomic():
        events.emit_on_commit(events.Name.DATASET_VERSION_READY, campaign_id=campaign.pk, data={"version": 1})
        raise RuntimeError("rolled back")
    with django_capture_on_commit_callbacks(execute=True):
        for name in mirrored:
            events.emit_on_commit(name, campaign_id=campaign.pk, data={"said": name.value})
    deliveries = Delivery.objects.order_by("pk")
    assert [(d.event, d.payload["data"]) for d in deliveries] == [(n.value, {"said": n.value}) for n in mirrored]


class Receiver:
    """A local HTTP receiver: records each request; ``fail_first`` answers 500 to the first request per path."""

    def __init__(self, fail_first: bool = True) -> None:
        self.requests: list[dict[str, Any]] = []
        seen: set[str] = set()
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                failing = self.path.endswith("/always-500") or (fail_first and self.path not in seen)
                seen.add(self.path)
                self.send_response(500 if failing else 200)
                self.end_headers()
                self.wfile.write(b"boom" if failing else b"ok")

        self.server, self.url = serve(Handler)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.server.shutdown()


def _verifies(secret: str, request: dict[str, Any]) -> bool:
    fields = dict(part.split("=", 1) for part in request["headers"][SIGNATURE_HEADER].split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + request["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_deliveries_are_signed_and_retried_by_the_worker(campaign_factory, make_user, settings, receiver,
                                                         killable_worker) -> None:
    # The worker's own deliveries and retries go to its queue too: the name killable_worker gives it.
    _, queue, log = killable_worker("webhooks", STEPLAB_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
                                    STEPLAB_WEBHOOK_RETRY_BASE_S="0.3", STEPLAB_WEBHOOK_MAX_ATTEMPTS="3",
                                    STEPLAB_WEBHOOK_QUEUE=f"webhooks-{os.getpid()}")
    settings.STEPLAB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STEPLAB_WEBHOOK_QUEUE = queue
    campaign = campaign_factory("hooked")
    numbered_solution(campaign, 2)
    hook, secret = register_webhook(campaign=campaign, url=f"{receiver.url}/steplab",
                                    events=[Event.CAMPAIGN_PROGRESS], user=SYSTEM)
    broken, _ = register_webhook(campaign=campaign, url=f"{receiver.url}/always-500",
                                 events=[Event.CAMPAIGN_PROGRESS], user=SYSTEM)
    labeler = make_user("judge")
    Membership.objects.create(campaign=campaign, user=labeler, role=Role.LABELER)
    assignment = leases.lease_next_solution(campaign, labeler).assignment
    assert assignment is not None
    # The one solution labeled: every milestone (25/50/75/100 %) is reached by this commit, announced once each.
    apply_labeling(LabelingInput(assignment_id=assignment.pk, client_key="k",
                                 ratings=[StepLabel(0, 1), StepLabel(1, 1)]), labeler)

    def settled() -> bool:
        return (Delivery.objects.count() == 8
                and not Delivery.objects.filter(status=Delivery.Status.PENDING).exists())

    wait_for(settled, timeout=90, what=lambda: log.read_text()[-3000:])
    assert sorted(ProgressMilestone.objects.values_list("percent", flat=True)) == [25, 50, 75, 100]
    good = sorted(Delivery.objects.filter(webhook=hook), key=lambda d: d.payload["data"]["percent_labeled"])
    assert [d.payload["data"]["percent_labeled"] for d in good] == [25, 50, 75, 100]
    assert {d.status for d in good} == {Delivery.Status.DELIVERED}
    # The receiver answered 500 to the first request: that delivery went again, and got its 200.
    retried = [d for d in good if d.attempts == 2]
    assert len(retried) == 1 and [a["status_code"] for a in retried[0].attempts_log] == [500, 200]
    to_hook = [r for r in receiver.requests if r["path"] == "/steplab"]
    assert len(to_hook) == 5 and all(_verifies(secret, r) for r in to_hook)
    assert not _verifies("whsec_wrong", to_hook[0])
    assert {r["headers"]["X-Steplab-Event"] for r in to_hook} == {"campaign.progress"}
    assert json.loads(to_hook[-1]["body"])["campaign"] == campaign.pk
    # A receiver that always fails: three attempts (the setting), further apart each time, then failed.
    gave_up = list(Delivery.objects.filter(webhook=broken))
    assert {d.status for d in gave_up} == {Delivery.Status.FAILED} and {d.attempts for d in gave_up} == {3}
    times = [datetime.fromisoformat(a["at"]) for a in gave_up[0].attempts_log]
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6, gaps
    assert gave_up[0].last_status_code == 500 and "HTTP 500" in gave_up[0].last_error

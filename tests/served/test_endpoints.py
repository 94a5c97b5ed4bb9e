"""Model endpoints: who registers them, the key encrypted at rest and never shown, the address policy, the slots
held across workers, the pages and the API."""
from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate import permissions
from annotate.models import Role
from endpoints import concurrency, crypto
from endpoints.models import Endpoint, EndpointSlot
from endpoints.selectors import served_model_for, usable_endpoints
from endpoints.services import EndpointRefused, check_connection, job_environment, register_endpoint
from rewards.served.client import ChatClient, ServedModel
from tests.factories import PASSWORD, CampaignFactory, MembershipFactory, UserFactory
from tests.served.conftest import MODEL_ID, ServedServer
from tests.served.leaks import places_holding, rows_holding

KEY = "sk-endpoint-test-" + "7f3a9c" * 4
PUBLIC_URL = "http://93.184.215.14:8000/v1"  # a public address literal: no DNS, never contacted


def member(campaign, role: str, name: str):
    user = UserFactory(username=name)
    MembershipFactory(campaign=campaign, user=user, role=role)
    return user


def staff_user(name: str = "staff"):
    return UserFactory(username=name, is_staff=True)


def logged_in(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def campaign_admin(db, caplog: pytest.LogCaptureFixture):
    """A campaign and its admin's logged-in client, with every log record captured for the checks on the key."""
    caplog.set_level(logging.DEBUG)
    campaign = CampaignFactory()
    return campaign, logged_in(member(campaign, Role.ADMIN, "admin"))


@pytest.mark.both_databases
@pytest.mark.django_db
def test_who_registers_endpoints() -> None:
    campaign = CampaignFactory()
    admin = member(campaign, Role.ADMIN, "admin")
    for role in (Role.LABELER, Role.RESEARCHER):
        with pytest.raises(permissions.NotAllowed):
            register_endpoint(member(campaign, role, f"m-{role}"), campaign=campaign, name="x", base_url=PUBLIC_URL,
                              model="m")
    with pytest.raises(permissions.NotAllowed):
        register_endpoint(None, campaign=campaign, name="x", base_url=PUBLIC_URL, model="m")  # type: ignore[arg-type]
    with pytest.raises(permissions.NotAllowed, match="staff-wide"):
        register_endpoint(admin, campaign=None, name="x", base_url=PUBLIC_URL, model="m")
    mine = register_endpoint(admin, campaign=campaign, name="judge", base_url=PUBLIC_URL, model="m")
    wide = register_endpoint(staff_user(), campaign=None, name="judge", base_url=PUBLIC_URL, model="m")
    assert (mine.registered_by_staff, wide.registered_by_staff) == (False, True)
    with pytest.raises(EndpointRefused) as twice:
        register_endpoint(admin, campaign=campaign, name="judge", base_url=PUBLIC_URL, model="m")
    assert twice.value.field == "name"
    # Those who may start machine labeling pick from the campaign's and the staff-wide ones; a researcher none.
    assert set(usable_endpoints(admin, campaign)) == {mine, wide}
    assert not usable_endpoints(member(campaign, Role.RESEARCHER, "reader"), campaign).exists()
    assert not usable_endpoints(member(CampaignFactory(), Role.ADMIN, "other-admin"), campaign).exists()


@pytest.mark.both_databases
@pytest.mark.django_db
def test_the_key_is_encrypted_at_rest_and_reaches_only_the_job() -> None:
    endpoint = register_endpoint(staff_user(), campaign=None, name="judge", base_url=PUBLIC_URL, model="m",
                                 api_key=f"  {KEY} ", timeout_s=12.5)
    stored = Endpoint.objects.values_list("api_key_encrypted", flat=True).get()
    assert stored and KEY not in stored and crypto.decrypt(stored) == KEY
    served = served_model_for(Endpoint.objects.get())
    assert served.api_key == KEY and KEY not in repr(served) and KEY not in str(endpoint)
    environment = job_environment(endpoint)
    assert environment["STEPLAB_ENDPOINT_KEY"] == KEY
    assert environment["STEPLAB_ENDPOINT_TIMEOUT"] == "12.5"
    assert rows_holding(KEY) == []  # no row anywhere holds the key in plain text


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_key_under_a_changed_secret_is_a_clear_error(settings) -> None:
    endpoint = register_endpoint(staff_user(), campaign=None, name="judge", base_url=PUBLIC_URL, model="m",
                                 api_key=KEY)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "another-secret-" + "x" * 40
    assert served_model_for(endpoint).api_key == KEY  # the old secret still opens it while it is a fallback
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(crypto.KeyUnreadable, match="register it again"):
        served_model_for(endpoint)


@pytest.mark.both_databases
@pytest.mark.django_db
def test_job_environment_is_what_a_node_reads(monkeypatch: pytest.MonkeyPatch, settings) -> None:
    settings.STEPLAB_ENDPOINT_ALLOW = ["10.0.0.0/8", "gpu.lab"]
    endpoint = register_endpoint(staff_user(), campaign=None, name="lab", base_url="http://10.2.3.4:8000/v1",
                                 model="Qwen/Qwen2.5-7B-Instruct", api_key=KEY, timeout_s=30)
    for name, value in job_environment(endpoint).items():
        monkeypatch.setenv(name, value)
    assert ServedModel.from_env() == served_model_for(endpoint)
    assert ServedModel.from_env().allow == ("10.0.0.0/8", "gpu.lab")


@pytest.mark.both_databases
@pytest.mark.django_db
def test_only_staff_reach_the_addresses_the_operator_allows(settings) -> None:
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    campaign = CampaignFactory()
    admin = member(campaign, Role.ADMIN, "admin")
    with pytest.raises(EndpointRefused, match="Only staff may") as refused:
        register_endpoint(admin, campaign=campaign, name="lab", base_url="http://127.0.0.1:8000/v1", model="m")
    assert refused.value.field == "base_url"
    with pytest.raises(EndpointRefused, match="STEPLAB_ENDPOINT_ALLOW"):
        register_endpoint(staff_user(), campaign=None, name="meta", base_url="http://169.254.169.254/v1", model="m")
    staff_made = register_endpoint(staff_user("staff2"), campaign=campaign, name="lab",
                                   base_url="http://127.0.0.1:8000/v1", model="m")
    assert served_model_for(staff_made).allow == ("127.0.0.1",)
    admin_made = register_endpoint(admin, campaign=campaign, name="pub", base_url=PUBLIC_URL, model="m")
    assert served_model_for(admin_made).allow == ()  # the operator's list is never lent to an admin's endpoint


def _hold_slots(endpoint: Endpoint, workers: int) -> tuple[int, int]:
    """Run ``workers`` threads that each hold a slot a moment; (most held at once, how many finished)."""
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "done": 0}
    errors: list[BaseException] = []

    def work() -> None:
        from django.db import connection

        try:
            with concurrency.slot(endpoint, wait_s=60):
                with lock:
                    state["now"] += 1
                    state["most"] = max(state["most"], state["now"])
                time.sleep(0.2)  # holds the slot while the others try
                with lock:
                    state["now"] -= 1
            with lock:
                state["done"] += 1
        except BaseException as error:  # noqa: BLE001 - reported by the test thread below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return state["most"], state["done"]


@pytest.mark.both_databases
@pytest.mark.django_db(transaction=True)
def test_slots_cap_concurrency_through_the_database(settings) -> None:
    settings.REDIS_URL = ""
    endpoint = register_endpoint(staff_user(), campaign=None, name="db", base_url=PUBLIC_URL, model="m",
                                 max_concurrency=2)
    assert _hold_slots(endpoint, 6) == (2, 6)
    assert concurrency.holders(endpoint) == 0


@pytest.mark.django_db(transaction=True)
def test_slots_cap_concurrency_through_redis(settings) -> None:
    if not settings.REDIS_URL:
        pytest.fail("this test needs REDIS_URL (the suite's Redis)")
    endpoint = register_endpoint(staff_user(), campaign=None, name="redis", base_url=PUBLIC_URL, model="m",
                                 max_concurrency=2)
    assert _hold_slots(endpoint, 6) == (2, 6)
    assert concurrency.holders(endpoint) == 0
    assert not EndpointSlot.objects.exists()  # Redis held them, not the database


@pytest.mark.both_databases
@pytest.mark.django_db
def test_a_dead_holders_slot_is_taken_back_and_a_full_endpoint_times_out(settings) -> None:
    settings.REDIS_URL = ""
    endpoint = register_endpoint(staff_user(), campaign=None, name="db", base_url=PUBLIC_URL, model="m",
                                 max_concurrency=1, timeout_s=1)
    with (concurrency.slot(endpoint), pytest.raises(concurrency.SlotUnavailable, match="1 request slots"),
          concurrency.slot(endpoint, wait_s=0.2)):
        pass
    EndpointSlot.objects.filter(endpoint=endpoint).update(
        holder="dead-worker", claimed_at=timezone.now() - timedelta(seconds=concurrency.default_lease_s(endpoint) + 1))
    with concurrency.slot(endpoint, wait_s=0.2):
        assert concurrency.holders(endpoint) == 1


def _renewal_holds(endpoint: Endpoint) -> None:
    # Waiting 1.5 s for a slot whose lease is 0.6 s: only the holder's renewals keep it from being taken back.
    with (concurrency.slot(endpoint, lease_s=0.6), pytest.raises(concurrency.SlotUnavailable),
          concurrency.slot(endpoint, wait_s=1.5, lease_s=0.6)):
        pass
    with concurrency.slot(endpoint, wait_s=0.5, lease_s=0.6):  # released: free again at once
        assert concurrency.holders(endpoint, lease_s=0.6) == 1


@pytest.mark.both_databases
@pytest.mark.django_db(transaction=True)
def test_a_held_database_slot_is_renewed_past_its_lease(settings) -> None:
    settings.REDIS_URL = ""
    _renewal_holds(register_endpoint(staff_user(), campaign=None, name="db", base_url=PUBLIC_URL, model="m",
                                     max_concurrency=1))


@pytest.mark.django_db(transaction=True)
def test_a_held_redis_slot_is_renewed_past_its_lease(settings) -> None:
    if not settings.REDIS_URL:
        pytest.fail("this test needs REDIS_URL (the suite's Redis)")
    _renewal_holds(register_endpoint(staff_user(), campaign=None, name="redis", base_url=PUBLIC_URL, model="m",
                                     max_concurrency=1))


@pytest.mark.both_databases
@pytest.mark.django_db
def test_pages_register_and_never_show_the_key(campaign_admin, caplog: pytest.LogCaptureFixture) -> None:
    campaign, admin = campaign_admin
    url = reverse("endpoints:campaign", args=[campaign.slug])
    posted = admin.post(url, {"name": "judge", "base_url": PUBLIC_URL, "model": "m", "api_key": KEY,
                              "max_concurrency": 2, "timeout_s": 30, "token_budget": 5000})
    assert posted.status_code == 200 and Endpoint.objects.filter(campaign=campaign, name="judge").exists()
    page = admin.get(url)
    assert page.status_code == 200 and b"judge" in page.content and KEY.encode() not in page.content
    refused = admin.post(url, {"name": "bad", "base_url": "http://10.0.0.1/v1", "model": "m",
                               "max_concurrency": 2, "timeout_s": 30, "token_budget": 5000, "api_key": KEY})
    assert refused.status_code == 400 and b"private" in refused.content and KEY.encode() not in refused.content
    assert admin.post(url, {"name": "bad", "base_url": PUBLIC_URL, "model": "m", "max_concurrency": 0,
                            "timeout_s": 30, "token_budget": 5000}).status_code == 400
    assert logged_in(member(campaign, Role.RESEARCHER, "reader")).get(url).status_code == 403
    assert admin.get(reverse("endpoints:staff")).status_code == 403
    assert logged_in(staff_user()).get(reverse("endpoints:staff")).status_code == 200
    assert KEY not in caplog.text


@pytest.mark.both_databases
@pytest.mark.django_db
def test_the_api_takes_a_key_and_answers_only_whether_there_is_one(campaign_admin,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    campaign, admin = campaign_admin
    created = admin.post("/api/endpoints/", {"campaign": campaign.slug, "name": "judge", "base_url": PUBLIC_URL,
                                             "model": "m", "api_key": KEY}, content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["has_api_key"] is True and "api_key" not in created.json()
    listed = admin.get("/api/endpoints/")
    assert listed.status_code == 200
    assert KEY.encode() not in listed.content and KEY.encode() not in created.content
    assert b"judge" in listed.content
    bad = admin.post("/api/endpoints/", {"campaign": campaign.slug, "name": "x", "base_url": "ftp://x/v1",
                                         "model": "m", "timeout_s": -1}, content_type="application/json")
    assert bad.status_code == 400 and "timeout_s" in bad.json()
    refused = admin.post("/api/endpoints/", {"campaign": campaign.slug, "name": "x", "base_url": "http://[::1]/v1",
                                             "model": "m"}, content_type="application/json")
    assert refused.status_code == 400 and "base_url" in refused.json()
    reader = logged_in(member(campaign, Role.RESEARCHER, "reader"))
    assert reader.post("/api/endpoints/", {"campaign": campaign.slug, "name": "y", "base_url": PUBLIC_URL,
                                           "model": "m"}, content_type="application/json").status_code == 403
    assert b"judge" not in reader.get("/api/endpoints/").content
    assert admin.post("/api/endpoints/", {"name": "wide", "base_url": PUBLIC_URL, "model": "m"},
                      content_type="application/json").status_code == 403
    assert KEY not in caplog.text


@pytest.mark.django_db
def test_test_connection_reports_the_served_models(served_server: ServedServer, settings,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    staff = staff_user()
    endpoint = register_endpoint(staff, campaign=None, name="local", base_url=served_server.base_url,
                                 model=MODEL_ID, api_key=KEY)
    assert check_connection(staff, endpoint=endpoint) == (True, f"Connected; the server serves: {MODEL_ID}.")
    client = logged_in(staff)
    page = client.post(reverse("endpoints:staff"), {"action": "test", "endpoint": endpoint.pk})
    assert page.status_code == 200 and f"the server serves: {MODEL_ID}".encode() in page.content
    answered = client.post(f"/api/endpoints/{endpoint.pk}/test-connection/")
    assert answered.json() == {"ok": True, "message": f"Connected; the server serves: {MODEL_ID}."}
    other = register_endpoint(staff, campaign=None, name="other", base_url=served_server.base_url, model="gpt-x")
    ok, message = check_connection(staff, endpoint=other)
    assert not ok and "does not serve 'gpt-x'" in message
    # The job's client works with what the selector hands it.
    assert ChatClient(served_model_for(endpoint)).chat([{"role": "user", "content": "Hi"}], max_tokens=2).texts
    listed = client.get("/api/endpoints/").content.decode() + client.get(reverse("endpoints:staff")).content.decode()
    assert places_holding(KEY, texts={"log": caplog.text, "pages and API": listed + page.content.decode()}) == []


@pytest.mark.django_db
def test_test_connection_with_a_wrong_key_is_short_and_sanitised(keyed_server: ServedServer, served_api_key: str,
                                                                  settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    settings.STEPLAB_ENDPOINT_ALLOW = ["127.0.0.1"]
    staff = staff_user()
    wrong = served_api_key[::-1]
    endpoint = register_endpoint(staff, campaign=None, name="keyed", base_url=keyed_server.base_url,
                                 model=MODEL_ID, api_key=wrong)
    page = logged_in(staff).post(reverse("endpoints:staff"), {"action": "test", "endpoint": endpoint.pk})
    assert page.status_code == 200 and b"refused the API key (HTTP 401)" in page.content
    assert wrong.encode() not in page.content and wrong not in caplog.text
    right = register_endpoint(staff, campaign=None, name="keyed-right", base_url=keyed_server.base_url,
                              model=MODEL_ID, api_key=served_api_key)
    assert check_connection(staff, endpoint=right)[0]
    assert served_api_key not in caplog.text


@pytest.mark.django_db
def test_an_admins_endpoint_on_a_private_address_sends_nothing(served_server: ServedServer, settings) -> None:
    """Registered while the address was public to the rules, then refused at call time: nothing is sent."""
    from tests.served.conftest import FaultProxy

    proxy = FaultProxy(served_server.base_url)
    try:
        campaign = CampaignFactory()
        endpoint = Endpoint.objects.create(campaign=campaign, name="sneaky", base_url=proxy.base_url, model=MODEL_ID)
        ok, message = check_connection(member(campaign, Role.ADMIN, "admin"), endpoint=endpoint)
        assert not ok and "STEPLAB_ENDPOINT_ALLOW" in message
        assert proxy.connections == 0
    finally:
        proxy.close()

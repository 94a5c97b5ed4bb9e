"""Login rate limiting, security headers and CSRF enforcement."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
def test_login_is_rate_limited_per_username(make_user, settings) -> None:
    settings.STEPLAB_LOGIN_RATE = "3/m"
    make_user("victim", password="right-Password-1")
    client = Client()
    codes = [client.post("/accounts/login/", {"username": "victim", "password": f"wrong{i}"}).status_code
             for i in range(3)]
    assert codes == [200, 200, 200]  # the form again, with an error
    blocked = client.post("/accounts/login/", {"username": "victim", "password": "right-Password-1"})
    assert blocked.status_code == 429 and b"Too many login attempts" in blocked.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_admin_login_has_the_same_limit(make_user, settings) -> None:
    settings.STEPLAB_LOGIN_RATE = "3/m"
    get_user_model().objects.create_superuser("root", "root@example.org", "right-Password-1")
    client = Client()
    codes = [client.post("/admin/login/", {"username": "root", "password": f"wrong{i}"}).status_code
             for i in range(3)]
    assert codes == [200, 200, 200]
    blocked = client.post("/admin/login/", {"username": "root", "password": "right-Password-1"})
    assert blocked.status_code == 429 and b"Too many login attempts" in blocked.content
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302  # still the login page


@pytest.mark.django_db
def test_username_variants_share_one_allowance(make_user, settings) -> None:
    """Authentication strips and NFKC-normalises the name: so does the counter."""
    settings.STEPLAB_LOGIN_RATE = "3/m"
    make_user("labeler", password="right-Password-1")
    client = Client(REMOTE_ADDR="10.0.0.1")
    for variant in (" labeler", "\uff4cabeler", "labeler\t"):  # the second: a full-width l
        assert client.post("/accounts/login/", {"username": variant, "password": "wrong"}).status_code == 200
    blocked = client.post("/accounts/login/", {"username": "labeler", "password": "right-Password-1"})
    assert blocked.status_code == 429 and "_auth_user_id" not in client.session


class Clock:
    """The limiter's clock, moved by the test (the stdlib's time, not a part of ours)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.mark.django_db
def test_the_window_slides_across_a_period_boundary(make_user, settings, monkeypatch) -> None:
    """10 failures at the end of one minute and more at the start of the next: still one minute's worth, refused
    (fixed one-minute buckets let 19 through in 10 s); the allowance comes back as the failures age."""
    settings.STEPLAB_LOGIN_RATE = "10/m"
    make_user("victim", password="right-Password-1")
    clock = Clock(6_000_055.0)  # 55 s into a minute
    monkeypatch.setattr("steplab.auth_views.time", clock)
    client = Client(REMOTE_ADDR="198.51.100.1")

    def attempt(password: str = "wrong") -> int:
        return client.post("/accounts/login/", {"username": "victim", "password": password}).status_code

    assert [attempt() for _ in range(10)] == [200] * 10
    clock.now += 6  # 1 s into the next minute
    assert attempt() == 429
    assert attempt("right-Password-1") == 429 and "_auth_user_id" not in client.session
    clock.now += 60  # the failures are a minute old
    assert attempt("right-Password-1") == 302 and "_auth_user_id" in client.session


@pytest.mark.django_db
def test_another_addresss_failures_do_not_lock_out_a_right_password(make_user, settings) -> None:
    settings.STEPLAB_LOGIN_RATE = "3/m"
    make_user("victim", password="right-Password-1")
    attacker = Client(REMOTE_ADDR="203.0.113.66")
    codes = [attacker.post("/accounts/login/", {"username": "victim", "password": f"guess{i}"}).status_code
             for i in range(6)]
    assert codes == [200, 200, 200, 429, 429, 429]
    owner = Client(REMOTE_ADDR="192.0.2.10")  # a fresh address
    response = owner.post("/accounts/login/", {"username": "victim", "password": "right-Password-1"})
    assert response.status_code == 302 and "_auth_user_id" in owner.session


@pytest.mark.django_db
def test_guesses_spread_over_many_addresses_leave_only_known_addresses_in(make_user, settings) -> None:
    settings.STEPLAB_LOGIN_ACCOUNT_RATE = "5/h"
    make_user("victim", password="right-Password-1")
    home = Client(REMOTE_ADDR="192.0.2.10")
    assert home.post("/accounts/login/", {"username": "victim", "password": "right-Password-1"}).status_code == 302
    for i in range(5):  # one failure from each of five addresses; repeats from one address count once
        for _ in range(2):
            Client(REMOTE_ADDR=f"203.0.113.{i + 1}").post("/accounts/login/", {"username": "victim", "password": "x"})
    fresh = Client(REMOTE_ADDR="198.51.100.99")
    assert fresh.post("/accounts/login/", {"username": "victim", "password": "right-Password-1"}).status_code == 429
    again = Client(REMOTE_ADDR="192.0.2.10")  # the address that signed in before
    assert again.post("/accounts/login/", {"username": "victim", "password": "right-Password-1"}).status_code == 302


@pytest.mark.django_db
def test_the_old_password_of_the_password_change_form_is_limited(make_user, settings) -> None:
    settings.STEPLAB_LOGIN_RATE = "3/m"
    user = make_user("changer", password="right-Password-1")
    client = Client()
    client.force_login(user)

    def change(old: str) -> int:
        return client.post("/accounts/password_change/", {"old_password": old, "new_password1": "New-Password-42x",
                                                          "new_password2": "New-Password-42x"}).status_code

    assert [change(f"guess{i}") for i in range(3)] == [200, 200, 200]
    assert change("right-Password-1") == 429
    user.refresh_from_db()
    assert user.check_password("right-Password-1")


@pytest.mark.django_db
def test_successful_logins_do_not_use_up_an_address(make_user, settings) -> None:
    """A labeling team behind one NAT logs in, one after another, far past the limit."""
    settings.STEPLAB_LOGIN_ADDRESS_RATE = "3/m"  # failures from one address over all names
    for i in range(8):
        make_user(f"team{i}", password="right-Password-1")
        client = Client(REMOTE_ADDR="192.0.2.7")
        response = client.post("/accounts/login/", {"username": f"team{i}", "password": "right-Password-1"})
        assert response.status_code == 302 and "_auth_user_id" in client.session, i
    # Failures from that address are still counted.
    codes = [Client(REMOTE_ADDR="192.0.2.7").post("/accounts/login/", {"username": f"team{i}", "password": "no"})
             .status_code for i in range(4)]
    assert codes == [200, 200, 200, 429]


@pytest.mark.django_db
def test_login_works_under_the_limit(make_user) -> None:
    make_user("alice", password="right-Password-1")
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "right-Password-1"})
    assert response.status_code == 302 and "_auth_user_id" in client.session


@pytest.mark.django_db
def test_csrf_is_enforced_on_login() -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/accounts/login/", {"username": "x", "password": "y"}).status_code == 403


@pytest.mark.django_db
def test_security_headers_and_csp_allow_only_self_hosted_scripts() -> None:
    response = Client().get("/accounts/login/")
    csp = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in csp.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in directives["script-src"] and "default-src" in directives
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    html = response.content.decode()
    assert "/static/vendor/katex/katex.min.js" in html and "htmx" in html
    assert "<script>" not in html  # no inline script anywhere on the page

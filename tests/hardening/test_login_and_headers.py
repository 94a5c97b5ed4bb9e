"""Login rate limiting, security headers and CSRF enforcement."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client


@pytest.fixture(autouse=True)
def _fresh_cache():  # type: ignore[no-untyped-def]
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
    for i, variant in enumerate((" labeler", "\uff4cabeler", "labeler\t")):  # the second: a full-width l
        client = Client(REMOTE_ADDR=f"10.0.0.{i + 1}")  # a fresh address each time: only the name is shared
        assert client.post("/accounts/login/", {"username": variant, "password": "wrong"}).status_code == 200
    client = Client(REMOTE_ADDR="10.0.0.9")
    blocked = client.post("/accounts/login/", {"username": "labeler", "password": "right-Password-1"})
    assert blocked.status_code == 429 and "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_successful_logins_do_not_use_up_an_address(make_user, settings) -> None:
    """A labeling team behind one NAT logs in, one after another, far past the limit."""
    settings.STEPLAB_LOGIN_RATE = "3/m"
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

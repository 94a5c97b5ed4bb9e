"""/api/docs/ under the site's CSP still works in a browser: Swagger UI loads from the sidecar's files, starts from
its own script file and draws the operations, with no CSP violation."""
from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}


@pytest.mark.django_db(transaction=True)
def test_the_api_docs_render_under_the_csp(browser: Browser, live_server: Any) -> None:
    page = browser.new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    response = page.goto(f"{live_server.url}/api/docs/")
    assert response is not None and "Content-Security-Policy" in {k.title(): v for k, v in response.headers.items()}
    page.wait_for_selector(".opblock", timeout=60_000)  # the operations drawn from the schema
    assert page.locator(".opblock").count() > 10
    assert violations == []

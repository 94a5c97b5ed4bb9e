import pytest
from playwright.sync_api import Page
from . import test_browser as tb
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

@pytest.mark.parametrize("n", range(3))
def test_debug(page: Page, live_server, campaign_factory, member, n) -> None:
    logs = []
    page.on("console", lambda m: logs.append(m.text))
    page.on("response", lambda r: logs.append(f"RESP {r.request.method} {r.url} {r.status} {r.request.post_data}") if "/assignments/" in r.url else None)
    try:
        tb.test_conversational_mode_end_to_end(page, live_server, campaign_factory, member)
    except Exception:
        print("\n".join(logs))
        print(page.evaluate("document.getElementById('workspace').outerHTML")[-6000:])
        raise

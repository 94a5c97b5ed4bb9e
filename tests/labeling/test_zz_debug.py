import pytest
from playwright.sync_api import Page, expect
from .test_browser import log_in, start_labeling, pressed, row, algebra  # noqa
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

def test_debug(page: Page, live_server, algebra) -> None:
    logs = []
    page.on("console", lambda m: logs.append(m.text))
    page.on("response", lambda r: logs.append(f"RESP {r.url} {r.status}"))
    log_in(page, live_server.url, "ann")
    start_labeling(page, "algebra")
    page.evaluate("""document.addEventListener('htmx:afterSwap', e => console.log('afterSwap', e.detail.elt.id, document.querySelector('.is-focused') && document.querySelector('.is-focused').id));
    document.addEventListener('htmx:oobBeforeSwap', e => console.log('oob', e.detail.target && e.detail.target.id));""")
    page.keyboard.press("3")
    expect(pressed(page, 0, "1")).to_have_attribute("aria-pressed", "true")
    page.wait_for_timeout(500)
    print(row(page, 1).evaluate("e => e.outerHTML")[:600])
    print("\n".join(logs))

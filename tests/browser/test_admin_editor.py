"""The lexicon editor in Debian's headless Chromium against a real HTTP server: sign in, edit a
test case (the gold task picked with the search-as-you-type picker, by keyboard), see the
preview, publish, and see /api/search answer differently. Saves docs/admin-editor.png and
docs/admin-preview.png for the README."""
import json
import time

import pytest

from tests.browser.conftest import screenshot
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, make_settings

QUERY = "Bus Route Management"
OLD_GOLD, NEW_GOLD = "transport.bus-routes", "health.lead-screening"


@pytest.fixture
def editor_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="b" * 40, SESSION_COOKIE_SECURE=0),
                    demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    app.extensions["taskfinder"].search.live(wait=True)
    return app


def first_result(page, base: str) -> str:
    page.goto(f"{base}/api/search?q={QUERY.replace(' ', '%20')}&k=1")
    return json.loads(page.locator("body").inner_text())["results"][0]["id"]


def test_an_editor_edits_previews_and_publishes_and_the_search_changes(editor_app, live_server, page):
    base = live_server(editor_app)
    assert first_result(page, base) == OLD_GOLD
    case = next(c for c in editor_app.extensions["taskfinder"].store.cases() if c.query == QUERY)

    page.goto(f"{base}/admin/login")
    page.fill("input[name=username]", "eddie")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.press("input[name=password]", "Enter")
    page.wait_for_url(f"{base}/admin/")

    page.goto(f"{base}/admin/cases/{case.id}/edit")
    page.uncheck(f"input[name=gold][value='{OLD_GOLD}']")
    search = page.locator("#gold-search")
    search.click()
    search.type("blood lead test")
    page.wait_for_selector(f"#gold-results li:has-text('{NEW_GOLD}')")
    selected = page.locator("#gold-results li[aria-selected=true]")
    for _ in range(10):   # the keyboard walks the listbox to the task
        search.press("ArrowDown")
        if NEW_GOLD in selected.inner_text():
            break
    search.press("Enter")
    assert page.is_checked(f"input[name=gold][value='{NEW_GOLD}']")
    page.fill("textarea[name=rationale]", "Blood lead levels are recorded per child (test edit).")
    screenshot(page, "admin-editor.png")

    page.click("button:has-text('Preview')")
    page.wait_for_selector("h1:has-text('Preview: Edit test case')")
    assert NEW_GOLD in page.inner_text("table.diff")
    page.wait_for_selector("section.preview:has-text('Cross-validated suite')")
    screenshot(page, "admin-preview.png")

    page.click("button[name=publish]")
    page.wait_for_selector("text=Published.")
    deadline = time.monotonic() + 20   # the index is rebuilt in the background after a publish
    while first_result(page, base) != NEW_GOLD and time.monotonic() < deadline:
        time.sleep(0.3)
    assert first_result(page, base) == NEW_GOLD

"""The lexicon editor in Debian's headless Chromium against a real HTTP server, with a sensible
edit of the demo catalog: sign in, add the test case a user needed ("bumped head on the slide"
finds no injury report today; its gold task picked with the search-as-you-type picker, by
keyboard), see the preview (as the public sees it), publish, see /api/search answer differently;
then roll it back through the confirmation page, which lists what the rollback undoes. Saves
docs/admin-editor.png and docs/admin-preview.png for the README."""
import json
import time

import pytest

from tests.browser.conftest import screenshot, sign_in
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, make_settings

QUERY = "bumped head on the slide"
GOLD = "health.injury-report"
RATIONALE = "A bump, fall or scrape at the center is recorded on the Injury / Incident Report."


@pytest.fixture
def editor_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="b" * 40, SESSION_COOKIE_SECURE=0),
                    demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    app.extensions["taskfinder"].search.live(wait=True)
    return app


def first_result(page, base: str, query: str = QUERY) -> str:
    response = page.request.get(f"{base}/api/search", params={"q": query, "k": "1"})
    return json.loads(response.text())["results"][0]["id"]


def wait_for_first(page, base: str, wanted: str, query: str = QUERY) -> str:
    deadline = time.monotonic() + 20   # the index is rebuilt in the background after a publish
    while first_result(page, base, query) != wanted and time.monotonic() < deadline:
        time.sleep(0.3)
    return first_result(page, base, query)


def test_an_editor_adds_a_case_previews_publishes_and_rolls_it_back(editor_app, live_server, page):
    page.set_default_timeout(120_000)   # a preview ranks the whole suite: seconds, more on a busy machine
    base = live_server(editor_app)
    before = first_result(page, base)
    assert before != GOLD
    store = editor_app.extensions["taskfinder"].store
    mark = store.versions(limit=1)[0].id

    sign_in(page, base)

    page.goto(f"{base}/admin/cases/new")
    page.fill("input[name=query]", QUERY)
    search = page.locator("#gold-search")
    search.click()
    search.type("injury")
    page.wait_for_selector(f"#gold-results li:has-text('{GOLD}')")
    selected = page.locator("#gold-results li[aria-selected=true]")
    for _ in range(10):   # the keyboard walks the listbox to the task
        search.press("ArrowDown")
        if GOLD in selected.inner_text():
            break
    search.press("Enter")
    assert page.is_checked(f"input[name=gold][value='{GOLD}']")
    page.fill("textarea[name=rationale]", RATIONALE)
    page.select_option("select[name=category]", "natural_language")
    page.fill("input[name=message]", "Staff say 'bumped head' for injury reports")
    screenshot(page, "admin-editor.png")

    page.click("button:has-text('Preview')")
    page.wait_for_selector("h1:has-text('Preview: New test case')")
    assert GOLD in page.inner_text("table.diff")
    page.wait_for_selector("section.preview:has-text('Cross-validated suite')")
    assert "what an anonymous user (the public) would see" in page.inner_text("section.preview")
    edited = page.locator("table.pv-compare").first
    assert GOLD not in edited.locator("td").first.inner_text() and GOLD in edited.locator("td").nth(1).inner_text()
    page.locator("form.pv-view").evaluate("choice => choice.scrollIntoView()")   # the viewer, then the preview
    page.evaluate("window.scrollBy(0, -12)")
    screenshot(page, "admin-preview.png")

    page.click("button[name=publish]")
    page.wait_for_selector("text=Published.")
    assert wait_for_first(page, base, GOLD) == GOLD

    # roll the edit back: the version page says what differs from now; the rollback asks first
    page.goto(f"{base}/admin/versions/{mark}")
    assert "Compared with the current catalog (1 record differs)" in page.inner_text("main")
    assert QUERY in page.inner_text("main")
    page.click("text=Review a rollback to version")
    page.wait_for_selector("h1:has-text('Roll back to version')")
    assert QUERY in page.inner_text("main") and "case deleted" in page.inner_text("main")
    assert first_result(page, base) == GOLD, "reviewing changed nothing"
    page.click("button[name=confirm]")
    page.wait_for_selector("text=Rolled back to version")
    assert wait_for_first(page, base, before) == before

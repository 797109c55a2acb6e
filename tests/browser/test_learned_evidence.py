"""Issue 16's browser test: a click in the widget shows up as learned evidence in the editor
after a fit. Real parts throughout: the demo app served over HTTP (waitress), Debian's Chromium
driven by Playwright, the widget posting its real impression and click to /api/events, the
analytics writer, the fit (`python app.py fit`'s SearchService.refit, which folds the new clicks
into learned_evidence first), and the editor's task page read in the browser. Then the editor
blocks the pair from the page, and the block is a version on the versions page. Saves
docs/admin-learned.png (the panel)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.browser.conftest import screenshot
from tests.browser.test_widget import COMBOBOX, capture_events, type_query, wait_final, wait_until
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, close_app, install_demo_fit, make_settings

import pytest

QUERY = "bus route paperwork"   # public tasks (a restricted best can be "not sure": docs/abstention.md)


@pytest.fixture
def learning_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    """The demo app on a database of its own (empty analytics), clicks counted as soon as they
    arrive (LEARNING_SETTLE_S=0), with an editor `eddie`, and the demo's shipped fit installed
    as `load-demo` installs it (tests/conftest.py: install_demo_fit): the fit below then folds
    the click into the learned evidence and finds nothing else to fit ("up to date"), instead
    of fitting the whole demo again (~15 s)."""
    settings = make_settings(tmp_path, shared_cache_dir, SECRET_KEY="k" * 40, SESSION_COOKIE_SECURE="0",
                             LEARNING_SETTLE_S="0")
    app = build_app(settings, demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    install_demo_fit(app)   # waits for the index too
    yield app
    close_app(app)


def test_a_widget_click_is_learned_evidence_in_the_editor_after_a_fit(learning_app, live_server, page):
    base = live_server(learning_app)
    services = learning_app.extensions["taskfinder"]
    events = capture_events(page)
    page.goto(base + "/")
    # no LLM here, so the widget's last request for the whole query is the final one (no rerank=1)
    with page.expect_response(lambda r: "/api/search" in r.url
                              and parse_qs(urlsplit(r.url).query).get("q") == [QUERY]) as final:
        type_query(page, QUERY)
    wait_final(page)
    results = final.value.json()["results"]
    assert len(results) >= 2
    target = results[1]        # not the first: a click below the top is what learning must see
    option = page.locator(f"[role=option][data-task-id='{target['id']}']")
    with page.expect_navigation():
        option.click()
    wait_until(page, lambda: [e for e in events if e["type"] == "click"])
    assert any(e["type"] == "impression" for e in events)

    learning_app.extensions["taskfinder_analytics"].flush()
    report = services.search.refit(services.search.live(wait=True))   # what `python app.py fit` runs
    assert report.get("status") in {"fitted", "up to date"} or report.get("status", "").startswith("defaults"), report

    page.goto(f"{base}/admin/tasks/{target['id']}")
    page.fill("input[name=username]", "eddie")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/admin/tasks/{target['id']}")
    row = page.locator("table.learned tbody tr", has_text=QUERY)
    assert row.count() == 1, page.locator("#learned").inner_text()
    cells = row.locator("td").all_text_contents()
    assert cells[1:5] == ["1", "1", "0", "1"], cells   # one session, from one network, nobody verified, one click
    assert 0.0 < float(cells[5]) <= 1.0
    assert cells[6] == "no: too few sessions", cells   # one click is not enough to count
    assert row.get_by_role("link", name="Make it a test case").count() == 1
    page.locator("#learned").scroll_into_view_if_needed()
    screenshot(page, "admin-learned.png")

    with page.expect_navigation():
        row.get_by_role("button", name="Block").click()
    assert services.store.blocked_pairs() == {(QUERY, target["id"])}
    assert "blocked" in page.locator("table.learned tbody tr", has_text=QUERY).inner_text()
    page.goto(f"{base}/admin/versions")
    assert "Learned match blocked" in page.locator("table").inner_text()

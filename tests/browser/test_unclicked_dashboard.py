"""Issue 16 item 1 in the browser: the queries people were shown results for and never clicked,
on the dashboard, each a link to the case form pre-filled with it. The evidence is written
straight into learned_evidence (how searches and impressions become it: tests/test_learning.py).
Saves docs/admin-unclicked.png; and the learned pairs that count at the next fit, new ones marked
(issue 33 item 1), docs/admin-counting.png."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import insert

from analytics.learning_models import LearnedEvidence
from search.learned import sketch_of
from tests.browser.conftest import screenshot
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, close_app, make_settings


@pytest.fixture
def dashboard_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    settings = make_settings(tmp_path, shared_cache_dir, SECRET_KEY="k" * 40, SESSION_COOKIE_SECURE="0")
    app = build_app(settings, demo_tasks, demo_cases)
    services = app.extensions["taskfinder"]
    services.accounts.hasher = FAST_HASHER
    services.accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    shown = dict(sessions=0, clicks=0, examinations=3.0, relevance=0.05, updated_at=datetime.now(timezone.utc),
                 networks=0, people=0)
    task = demo_tasks[0].id
    with services.store.engine.begin() as connection:
        connection.execute(insert(LearnedEvidence), [
            dict(query=query, task_id=task, viewer_sketch=sketch_of(f"{query}-{i}" for i in range(n)),
                 viewer_network_sketch=sketch_of(f"net-{i}" for i in range(n)), **shown)
            for query, n in (("what is the weather in paris", 6), ("book a flight to denver", 4))])
        connection.execute(insert(LearnedEvidence), [   # a pair that counts at the next fit (issue 33 item 1)
            dict(query="jab records", task_id="health.immunizations", sessions=5, clicks=5, examinations=6.0,
                 relevance=0.8, updated_at=datetime.now(timezone.utc), networks=5, people=0,
                 session_sketch=sketch_of(f"s{i}" for i in range(5)), network_sketch=sketch_of(f"n{i}" for i in range(5)))])
    yield app
    close_app(app)


def sign_in_to_the_dashboard(app, live_server, page) -> str:
    """Serve `app`, sign in as the editor and land on the dashboard (its base URL returned)."""
    base = live_server(app)
    page.goto(base + "/admin/")
    page.fill("input[name=username]", "eddie")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/admin/")
    return base


def test_the_dashboard_shows_the_queries_nobody_clicks_and_makes_one_a_case(dashboard_app, live_server, page):
    sign_in_to_the_dashboard(dashboard_app, live_server, page)
    heading = page.locator("#unclicked")
    assert heading.inner_text() == "Queries nobody clicks (2)"
    rows = page.locator("table.unclicked tbody tr")
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == [
        "what is the weather in paris", "book a flight to denver"]            # most viewed first
    assert rows.first.locator("td").all_text_contents()[1:5] == ["6", "6", "0", "0"]
    heading.scroll_into_view_if_needed()
    screenshot(page, "admin-unclicked.png")
    with page.expect_navigation():
        rows.first.get_by_role("link", name="make it a test case").click()
    assert page.locator("input[name=query]").input_value() == "what is the weather in paris"


def test_the_dashboard_shows_the_pairs_that_will_count_at_the_next_fit(dashboard_app, live_server, page):
    sign_in_to_the_dashboard(dashboard_app, live_server, page)
    heading = page.locator("#learned")
    assert heading.inner_text() == "Learned pairs that count (1, 1 new)"
    row = page.locator("table.counting tbody tr")
    assert row.count() == 1
    cells = row.locator("td").all_text_contents()
    assert cells[:5] == ["jab records", "Immunization Records", "5", "5", "0"]
    assert cells[-1] == "new: joins at the next fit"
    heading.scroll_into_view_if_needed()
    screenshot(page, "admin-counting.png")
    with page.expect_navigation():
        row.get_by_role("link", name="Immunization Records").click()
    assert page.url.endswith("/admin/tasks/health.immunizations#learned")
    assert "jab records" in page.locator("#learned").locator("xpath=following::table[1]").inner_text()

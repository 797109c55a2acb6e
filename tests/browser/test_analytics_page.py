"""The admin analytics page in Debian's Chromium: signed in through the real login form, it shows
the six charts and the query tables under the admin CSP (no violation reported), the "turn into a
test case" links point at the editor pre-filled, and a screenshot goes to docs/ for the README."""
from __future__ import annotations

import random
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from analytics.records import EventRecord, SearchRecord, new_search_id
from catalog.models import utcnow
from tests.browser.conftest import screenshot
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, make_settings

QUERIES = {  # query -> (task clicked, or None for a query that finds nothing)
    "eligibility": "ersea.eligibility-record", "attendance": "attendance.daily", "asq screening": "health.asq3-screening",
    "menus": "nutrition.menus", "cacfp claim": "nutrition.cacfp-claim", "xyzzy report": None, "pir export": None,
}


def synthetic_log(days: int = 14, seed: int = 7) -> tuple[list[SearchRecord], list[EventRecord]]:
    """A plausible fortnight: each day 20-40 searches; found queries are clicked 60% of the time
    (position 1-3); a query that finds nothing is usually reformulated by adding "family resources"
    (a related rephrasing: analytics.formulas.related), whose first result is clicked."""
    rng, searches, events = random.Random(seed), [], []
    start = utcnow().replace(hour=9, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)
    for day in range(days):
        for n in range(rng.randint(20, 40)):
            at = start + timedelta(days=day, minutes=n * 7)
            session = f"synthetic-{day:02d}-{n:03d}"
            query = rng.choice(list(QUERIES))
            task = QUERIES[query]
            sid = new_search_id()
            searches.append(SearchRecord(sid, at, session, query, True, (task,) if task else (), task is None))
            if task and rng.random() < 0.6:
                events.append(EventRecord(at + timedelta(seconds=5), sid, "click", session, task, rng.randint(1, 3)))
            elif task is None and rng.random() < 0.7:
                again = new_search_id()
                searches.append(SearchRecord(again, at + timedelta(seconds=30), session, f"{query} family resources", True,
                                             ("family.resource-directory",)))
                events.append(EventRecord(at + timedelta(seconds=40), again, "click", session,
                                          "family.resource-directory", 1))
    return searches, events


@pytest.fixture
def analytics_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="k" * 40, SESSION_COOKIE_SECURE="0",
                                  ANALYTICS_FLUSH_INTERVAL_S="3600"), demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("vera", ADMIN_PASSWORD, "viewer", actor="cli:test")
    app.extensions["taskfinder_analytics"].store.write(*synthetic_log())
    app.extensions["taskfinder_analytics"].rollup(force=True)   # the page reads the daily roll-ups
    yield app
    app.extensions["taskfinder_analytics"].close()


def test_the_analytics_page_in_a_browser(analytics_app, live_server, page):
    base = live_server(analytics_app)
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text)
            if message.type == "error" and "favicon.ico" not in (message.location or {}).get("url", "") else None)
    page.on("response", lambda response: problems.append(f"{response.status} {response.url}")
            if response.status >= 400 and not response.url.endswith("/favicon.ico") else None)
    page.goto(f"{base}/admin/analytics/?days=30")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/admin/analytics/?days=30")
    assert page.locator("svg[role=img]").count() == 6
    assert page.locator("#chart-ctr polyline").count() >= 1
    assert page.get_by_role("link", name="Analytics").count() == 1
    no_result = page.locator("table.queries", has_text="Queries whose searches showed no task")
    link = no_result.locator("a.make-case").first.get_attribute("href")
    parts = urlsplit(link)
    assert parts.path == "/admin/cases/new"
    query = parse_qs(parts.query)
    assert query["query"][0] in {"xyzzy report", "pir export"}          # the first no-result query
    assert query["gold"] == ["family.resource-directory"]               # what people found after it
    assert problems == []          # no CSP violation, no failed asset
    page.set_viewport_size({"width": 1100, "height": 820})
    screenshot(page, "analytics-page.png", full_page=False)

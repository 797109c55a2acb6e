"""Issue 17 item 6 and issue 19 item 8, on SQLite and PostgreSQL: the analytics report comes from
daily roll-ups (a page view reads days, not rows) and equals the report computed from the raw
log; session-less API calls are requests, not searches; the page has Top searches / Top results
and no developer text."""
from __future__ import annotations

import random
import re
from datetime import date, datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from analytics.recorder import AnalyticsRecorder, RecorderConfig
from analytics.records import EventRecord, SearchRecord
from analytics.report import load_report, load_rollup_report, summarise
from analytics.rollup import final_after
from analytics.store import AnalyticsStore
from tests.conftest import FAST_HASHER, build_app, close_app, make_settings, postgres_schema, signed_in

FIRST = date(2026, 3, 2)
DAYS = 4
WORDS = ["lead", "screening", "menus", "cacfp", "claim", "hearing", "vision", "waitlist", "xyzzy"]
TASKS = [f"task.{n}" for n in range(12)]


def synthetic_log(seed: int = 7) -> tuple[list[SearchRecord], list[EventRecord]]:
    """A log over DAYS days: sessions typing queries keystroke by keystroke, clicks (some returned
    from), reformulations, no-result searches, and session-less polling requests."""
    rng = random.Random(seed)
    searches, events = [], []
    serial = 0

    def next_id() -> str:
        nonlocal serial
        serial += 1
        return f"s{serial:021d}"

    for day in range(DAYS):
        for n in range(60):
            session = f"sess-{day}-{n:06d}"
            at = datetime.combine(FIRST + timedelta(days=day), datetime.min.time(), tzinfo=timezone.utc) + \
                timedelta(hours=rng.uniform(1, 22))
            for _chain in range(rng.randint(1, 3)):
                query = " ".join(rng.sample(WORDS, rng.randint(1, 2)))
                no_result = "xyzzy" in query
                results = () if no_result else tuple(rng.sample(TASKS, 5))
                for end in sorted({rng.randint(1, len(query)), len(query)}):
                    searches.append(SearchRecord(next_id(), at, session, query[:end], end == len(query), results))
                    at += timedelta(seconds=rng.uniform(0.5, 3))
                last = searches[-1]
                if results and rng.random() < 0.5:
                    position = rng.randint(1, 5)
                    events.append(EventRecord(at + timedelta(seconds=2), last.id, "click", session,
                                              results[position - 1], position))
                    if rng.random() < 0.2:
                        events.append(EventRecord(at + timedelta(seconds=30), last.id, "return", session,
                                                  results[position - 1]))
                at += timedelta(seconds=rng.uniform(5, 200))
        for n in range(25):   # an API client polling without a session
            at = datetime.combine(FIRST + timedelta(days=day), datetime.min.time(), tzinfo=timezone.utc) + \
                timedelta(hours=2, minutes=n)
            searches.append(SearchRecord(next_id(), at, None, "status", True, ("task.1",)))
    events.append(EventRecord(events[-1].at, "made-up-id-0000000000", "click", "sess-x-00000", "task.2", 1))
    return searches, events


def comparable(report) -> dict:
    return {k: v for k, v in report.as_dict().items() if k != "as_of"}


def test_the_report_from_roll_ups_equals_the_report_from_the_raw_log(engine):
    store = AnalyticsStore(engine)
    searches, events = synthetic_log()
    store.write(searches, events)
    last = FIRST + timedelta(days=DAYS - 1)
    now = final_after(last) + timedelta(minutes=1)
    recorder = AnalyticsRecorder(store, RecorderConfig(queue_size=10, flush_interval_s=3600, retention_days=30),
                                 clock=lambda: now)
    assert recorder.rollup() == 31          # the retention span: every day, the empty ones too
    assert recorder.rollup() == 0           # all final: nothing is rolled up again
    exact = load_report(store, FIRST, last)
    rolled = load_rollup_report(store, FIRST, last)
    assert exact.total.searches > 200 and exact.total.clicks > 50 and exact.total.reformulated > 10
    assert exact.no_result_queries and exact.low_ctr_queries and exact.top_results
    assert comparable(rolled) == comparable(exact)
    assert rolled.as_of == now
    # the page reads days, not rows: without the raw log the roll-up report is unchanged
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM search_events"))
        connection.execute(text("DELETE FROM search_log"))
    assert comparable(load_rollup_report(store, FIRST, last)) == comparable(exact)
    recorder.close()


def test_a_day_is_rolled_up_again_until_a_late_click_can_no_longer_change_it(engine):
    store = AnalyticsStore(engine)
    day = FIRST
    at = datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc) + timedelta(hours=23, minutes=50)
    search = SearchRecord("late-click-00000000001", at, "sess-late-0001", "menus", True, ("task.1",))
    store.write([search], [])
    clock = [at + timedelta(minutes=5)]
    recorder = AnalyticsRecorder(store, RecorderConfig(queue_size=10, flush_interval_s=3600, retention_days=3,
                                                       rollup_interval_s=300), clock=lambda: clock[0])
    recorder.rollup(days=[day])
    assert load_rollup_report(store, day, day).total.clicked == 0
    store.write([], [EventRecord(at + timedelta(hours=3), search.id, "click", "sess-late-0001", "task.1", 1)])
    clock[0] = at + timedelta(minutes=6)
    recorder.rollup()                                          # today was rolled up a minute ago: not due
    assert load_rollup_report(store, day, day).total.clicked == 0
    clock[0] = at + timedelta(hours=4)
    assert recorder.rollup() >= 1
    assert load_rollup_report(store, day, day).total.clicked == 1
    clock[0] = final_after(day) + timedelta(seconds=1)
    recorder.rollup()
    assert store.rollup_state(day, day)[day][1] is True      # final
    store.write([], [EventRecord(clock[0], search.id, "click", "sess-late-0001", "task.1", 1)])
    clock[0] += timedelta(hours=1)
    recorder.rollup()
    assert load_rollup_report(store, day, day).total.clicks == 1   # a final day is not read again
    recorder.close()


def test_session_less_requests_are_not_searches():
    """Issue 19 item 8: 101 polling requests without a session used to be 101 searches at 1% CTR."""
    at = datetime(2026, 3, 2, 12, tzinfo=timezone.utc)
    searches = [SearchRecord(f"poll-{n:017d}", at + timedelta(seconds=n), None, "lead", True, ("task.1",))
                for n in range(101)]
    person = SearchRecord("person-0000000000001", at, "sess-person-01", "lead", True, ("task.1",))
    click = EventRecord(at + timedelta(seconds=3), person.id, "click", "sess-person-01", "task.1", 1)
    report = summarise([*searches, person], [click], at.date(), at.date())
    assert report.requests == 102 and report.sessionless_requests == 101
    assert report.total.searches == 1 and report.total.click_through_rate == 1.0
    assert report.top_results == [("task.1", 1)]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def page_app(request, tmp_path_factory, shared_cache_dir, demo_tasks):
    env = {"SECRET_KEY": "k" * 40, "ANALYTICS_FLUSH_INTERVAL_S": "3600", "EMBEDDINGS_ENABLED": "0"}

    def make(extra):
        app = build_app(make_settings(tmp_path_factory.mktemp("rollup"), shared_cache_dir, **env, **extra),
                        demo_tasks[:20], [])
        app.extensions["taskfinder"].accounts.hasher = FAST_HASHER
        app.extensions["taskfinder"].accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
        return app

    if request.param == "sqlite":
        yield make({})
        return
    with postgres_schema() as (_schema, url):
        app = make({"DATABASE_URL": url})
        yield app
        close_app(app)


def test_the_page_shows_top_searches_and_results_from_roll_ups_without_developer_text(page_app):
    recorder = page_app.extensions["taskfinder_analytics"]
    # all six in the past (the last 27 minutes ago): spread into the future, the sixth fell on
    # tomorrow, outside the 7 days ending today, when the suite ran in the hour before midnight UTC
    now = datetime.now(timezone.utc) - timedelta(hours=1)
    searches = [SearchRecord(f"page-{n:017d}", now + timedelta(seconds=n * 400), f"sess-page-{n:04d}",
                             "menus" if n % 3 else "cacfp claim", True, ("nutrition.menus", "cacfp.claim"))
                for n in range(6)]
    polls = [SearchRecord(f"poll-{n:017d}", now, None, "health check", True, ()) for n in range(40)]
    clicks = [EventRecord(now + timedelta(seconds=n * 400 + 5), s.id, "click", s.session_id, "cacfp.claim", 2)
              for n, s in enumerate(searches) if n % 2 == 0]
    recorder.store.write([*searches, *polls], clicks)
    recorder.rollup(force=True)
    viewer, _csrf = signed_in(page_app, "vera")
    html = viewer.get("/admin/analytics/?days=7").get_data(as_text=True)
    totals = re.search(r'<dl class="summary" id="totals">(.*?)</dl>', html, re.S).group(1)
    assert "<dt>Searches</dt><dd>6</dd>" in totals                 # not 46: the 40 polls are not searches
    assert "40 of the requests came without a session" in html
    assert "<h2>Top searches</h2>" in html and "<h2>Top results</h2>" in html
    top = re.search(r'<table class="queries" id="top-results">(.*?)</table>', html, re.S).group(1)
    assert re.search(r">cacfp\.claim \(not in the catalog\)</span></td><td>3</td>", top)   # an id no task has
    assert "formulas.py" not in html and "Writer:" not in html and "waiting to be written" not in html

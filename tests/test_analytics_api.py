"""Search analytics over HTTP, on SQLite and PostgreSQL: the search log behind /api/search
(written in the background, never on the request path), POST /api/events (validation, limits,
storage), retention, the admin analytics page, and CORS on the public API."""
from __future__ import annotations

import json
import re
import sqlite3
import time
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select, text

from analytics.models import SearchEvent, SearchLogEntry
from analytics.records import EventRecord, SearchRecord
from analytics.recorder import AnalyticsRecorder, RecorderConfig
from catalog.models import utcnow
from tests.conftest import FAST_HASHER, build_app, close_app, make_settings, postgres_schema, signed_in

ORIGIN = "https://host.example.org"
SESSION = "sess-0123456789"
SEARCH_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def app(request, tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The demo app with a viewer, a CORS allow-list, and a writer thread that never flushes by
    itself during a test (the tests flush when they want to look at the database)."""
    data_dir = tmp_path_factory.mktemp("analytics")
    env = {"SECRET_KEY": "k" * 40, "ANALYTICS_FLUSH_INTERVAL_S": "3600", "CORS_ORIGINS": ORIGIN}

    def make(extra):
        app = build_app(make_settings(data_dir, shared_cache_dir, **env, **extra), demo_tasks, demo_cases)
        accounts = app.extensions["taskfinder"].accounts
        accounts.hasher = FAST_HASHER
        accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
        return app

    with postgres_schema() if request.param == "postgresql" else nullcontext((None, None)) as (_schema, url):
        app = make({"DATABASE_URL": url} if url else {})
        yield app
        close_app(app)


def recorder(app) -> AnalyticsRecorder:
    return app.extensions["taskfinder_analytics"]


@pytest.fixture(autouse=True)
def empty_tables(app):
    recorder(app).flush()
    with recorder(app).store.engine.begin() as connection:
        connection.execute(text("DELETE FROM search_events"))
        connection.execute(text("DELETE FROM search_log"))
        for table in ("analytics_task_days", "analytics_query_days", "analytics_days"):
            connection.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def client(app):
    return app.test_client()


TABLES = {"search_log": SearchLogEntry.__table__, "search_events": SearchEvent.__table__}


def rows(app, table: str) -> list[dict]:
    """The table's rows, oldest first, with column types applied (JSON lists, booleans)."""
    model = TABLES[table]
    with recorder(app).store.engine.connect() as connection:
        return [dict(r._mapping) for r in connection.execute(select(model).order_by(model.c.at))]


def search(client, q: str, **params) -> dict:
    response = client.get("/api/search", query_string={"q": q, **params})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def post_events(client, events: list[dict], session_id: str | None = SESSION, **kwargs):
    body = {"events": events, **({"session_id": session_id} if session_id else {})}
    return client.post("/api/events", data=json.dumps(body), content_type=kwargs.pop("content_type", "application/json"),
                       **kwargs)


# -- the search log ------------------------------------------------------------------------------
def test_every_search_gets_its_own_unguessable_id(client):
    ids = [search(client, "lead screening")["search_id"] for _ in range(3)]
    assert all(SEARCH_ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == 3


def test_a_search_is_logged_in_the_background_not_on_the_request_path(app, client):
    body = search(client, "  Devlopmental   SCRN ", k=3, rerank=0, session=SESSION)
    assert rows(app, "search_log") == []          # answered, but nothing written yet
    assert recorder(app).flush() == 1
    [row] = rows(app, "search_log")
    assert row["id"] == body["search_id"]
    assert row["query"] == "devlopmental scrn"    # normalised: case-folded, spaces collapsed
    assert row["session_id"] == SESSION
    assert row["rerank"] is False
    assert row["result_ids"] == [r["id"] for r in body["results"]]
    assert row["no_confident_match"] is body["no_confident_match"] is False
    assert row["degraded"] == body["degraded"]
    assert abs((utcnow() - _aware(row["at"])).total_seconds()) < 60
    # nothing about the caller but the opaque session id (and, only where a credential verified
    # a person, their lossy pseudonym: none here)
    assert set(row) == {"id", "at", "session_id", "query", "rerank", "result_ids", "no_confident_match", "degraded",
                        "person"}
    assert row["person"] is None


def test_the_final_search_is_marked_rerank_and_no_session_is_fine(app, client):
    search(client, "eligibility", rerank=1)
    recorder(app).flush()
    [row] = rows(app, "search_log")
    assert row["rerank"] is True and row["session_id"] is None


@pytest.mark.parametrize("session", ["", "short", "x" * 65, "has space1", "semi;colon", "abcdefgh\n"])
def test_a_malformed_session_is_a_400(client, session):
    response = client.get("/api/search", query_string={"q": "lead", "session": session})
    assert response.status_code == 400
    assert response.get_json() == {"error": "session must be 8-64 characters of A-Z, a-z, 0-9, '_' and '-'"}


def test_a_locked_database_does_not_hold_up_a_search(app, client):
    """Fault injection: another connection holds SQLite's write lock. A write on the request path
    would wait for it and fail ("database is locked"); the search must answer regardless, and the
    log row lands once the lock is released."""
    engine = recorder(app).store.engine
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's database-wide write lock is the fault injected here")
    blocker = sqlite3.connect(engine.url.database, timeout=0.1, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        body = search(client, "hearing screening", session=SESSION)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    recorder(app).flush()
    assert [r["id"] for r in rows(app, "search_log")] == [body["search_id"]]


def test_the_writer_thread_flushes_and_purges_by_itself(app):
    """A writer with a short interval: what is queued reaches the database without anyone calling
    flush(), and rows older than the retention are purged by the same thread."""
    store = recorder(app).store
    old = utcnow() - timedelta(days=100)
    store.write([SearchRecord("old-search-0000001", old, "s-old-000", "old", False, ())],
                [EventRecord(old, "old-search-0000001", "click", task_id="t", position=1)])
    writer = AnalyticsRecorder(store, RecorderConfig(queue_size=10, flush_interval_s=0.05, retention_days=90))
    try:
        writer.record_search(SearchRecord("new-search-0000001", utcnow(), "s-new-000", "new", True, ("t1",)))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and [r["id"] for r in rows(app, "search_log")] != ["new-search-0000001"]:
            time.sleep(0.05)
    finally:
        writer.close()
    assert [r["id"] for r in rows(app, "search_log")] == ["new-search-0000001"]
    assert rows(app, "search_events") == []
    assert writer.counts["search", "written"] == 1


def test_a_full_queue_drops_and_counts_and_never_blocks(app, client):
    small = AnalyticsRecorder(recorder(app).store, RecorderConfig(queue_size=2, flush_interval_s=3600, retention_days=90))
    original = app.extensions["taskfinder_analytics"]
    app.extensions["taskfinder_analytics"] = small
    try:
        for _ in range(3):
            search(client, "menus")                       # the third is answered, and not logged
        response = post_events(client, [{"type": "return", "search_id": "A" * 22, "task_id": "t"}])
        assert response.status_code == 503 and response.headers["Retry-After"] == "5"
        assert "buffer is full" in response.get_json()["error"]
        assert small.counts["search", "queued"] == 2 and small.counts["search", "dropped_full"] == 1
        assert small.counts["events", "dropped_full"] == 1
        assert small.flush() == 2
    finally:
        small.close()
        app.extensions["taskfinder_analytics"] = original
    metrics = app.test_client().get("/metrics").get_data(as_text=True)
    assert 'taskfinder_analytics_records_total{kind="search",outcome="queued"}' in metrics


def test_with_analytics_off_nothing_is_recorded(app, client):
    off = AnalyticsRecorder(recorder(app).store, RecorderConfig(queue_size=10, flush_interval_s=3600, retention_days=90,
                                                               enabled=False))
    original = app.extensions["taskfinder_analytics"]
    app.extensions["taskfinder_analytics"] = off
    try:
        body = search(client, "menus", session=SESSION)
        response = post_events(client, [{"type": "click", "search_id": body["search_id"], "task_id": "t", "position": 1}])
        assert SEARCH_ID.fullmatch(body["search_id"])
        assert response.status_code == 202 and response.get_json() == {"accepted": 0}
        assert off.flush() == 0 and off.pending() == 0
    finally:
        app.extensions["taskfinder_analytics"] = original
    recorder(app).flush()
    assert rows(app, "search_log") == [] and rows(app, "search_events") == []


# -- POST /api/events ------------------------------------------------------------------------------
def test_events_are_accepted_and_stored(app, client):
    body = search(client, "CACFP meal count", k=5, session=SESSION)   # public tasks: docs/abstention.md, hidden tasks
    sid, shown = body["search_id"], [r["id"] for r in body["results"]]
    response = post_events(client, [
        {"type": "impression", "search_id": sid, "query": "CACFP  Meal count", "task_ids": shown},
        {"type": "click", "search_id": sid, "task_id": shown[1], "position": 2},
        {"type": "dwell", "search_id": sid, "task_id": shown[1], "dwell_ms": 12000},
        {"type": "return", "search_id": sid, "task_id": shown[1]},
    ])
    assert response.status_code == 202
    assert response.get_json() == {"accepted": 4}
    recorder(app).flush()
    stored = sorted(rows(app, "search_events"), key=lambda r: r["id"])
    assert [(r["type"], r["search_id"], r["session_id"]) for r in stored] == \
        [(kind, sid, SESSION) for kind in ("impression", "click", "dwell", "return")]
    assert stored[0]["query"] == "cacfp meal count" and stored[0]["task_ids"] == shown
    assert (stored[1]["task_id"], stored[1]["position"]) == (shown[1], 2)
    assert stored[2]["dwell_ms"] == 12000
    assert set(stored[0]) == {"id", "at", "session_id", "search_id", "type", "task_id", "position", "dwell_ms",
                              "query", "task_ids", "network"}
    # the network is a keyed, lossy pseudonym (analytics.sources.network_pseudonym), never the address
    assert {len(r["network"]) for r in stored} == {4} and not any("127.0" in r["network"] for r in stored)


def test_text_plain_is_accepted_for_send_beacon(app, client):
    response = post_events(client, [{"type": "return", "search_id": "B" * 22, "task_id": "t"}],
                           content_type="text/plain;charset=UTF-8")
    assert response.status_code == 202 and response.get_json() == {"accepted": 1}


SID = "C" * 22


@pytest.mark.parametrize("events, message", [
    ([{"type": "click", "search_id": SID, "task_id": "t", "position": 0}],
     "events[0].position: 0 is less than the minimum of 1"),
    ([{"type": "return", "search_id": SID, "task_id": "t"}, {"type": "click", "search_id": SID, "task_id": "t"}],
     "events[1].position: is required in a click event"),
    ([{"type": "dwell", "search_id": SID, "task_id": "t", "dwell_ms": "long"}],
     "events[0].dwell_ms: 'long' is not of type 'integer'"),
    ([{"type": "click", "search_id": SID, "task_id": "t", "position": 1, "ip": "10.0.0.1"}],
     "events[0].ip: is not a field of a click event"),
    ([{"type": "hover", "search_id": SID}], "events[0].type: must be one of impression, click, dwell, return"),
    ([{"search_id": SID}], "events[0].type: is required in an event"),
    ([{"type": "return", "search_id": "guess", "task_id": "t"}],
     "events[0].search_id: 'guess' does not match '^[A-Za-z0-9_-]{16,64}$'"),
    ([{"type": "return", "search_id": SID + "\n", "task_id": "t"}],
     f"events[0].search_id: {SID + chr(10)!r} does not match '^[A-Za-z0-9_-]{{16,64}}$'"),
    ([{"type": "impression", "search_id": SID, "query": "q", "task_ids": ["a", ""]}],
     "events[0].task_ids[1]: has 0 characters; at least 1 allowed"),
    ([], "events: has 0 items; at least 1 allowed"),
    ([{"type": "return", "search_id": SID, "task_id": "t"}] * 51, "events: has 51 items; at most 50 allowed"),
    ([5], "events[0]: 5 is not of type 'object'"),
])
def test_an_invalid_event_is_a_400_naming_its_index_and_field(app, client, events, message):
    response = post_events(client, events)
    assert response.status_code == 400
    assert response.get_json() == {"error": message}
    recorder(app).flush()
    assert rows(app, "search_events") == []      # all or nothing


@pytest.mark.parametrize("body, status, message", [
    ("{not json", 400, "the body is not valid JSON"),
    ("[" * 5000 + "]" * 5000, 400, "the body is not valid JSON"),
    ('{"events": [], "session_id": "x"}', 400, "session_id: 'x' does not match"),
    ('{"session_id": "abcdefgh"}', 400, "events: is required in the request"),
    ('{"events": [{"type": "return", "search_id": "%s", "task_id": "t"}], "ua": "Mozilla"}' % SID, 400,
     "ua: is not a field of the request"),
    ("[]", 400, "the body [] is not of type 'object'"),
    ('{"events": [{"type": "impression", "search_id": "%s", "query": "%s", "task_ids": []}]}' % (SID, "q" * 17000),
     413, "the body is larger than 16384 bytes"),
])
def test_a_bad_body_is_refused_with_a_message(client, body, status, message):
    response = client.post("/api/events", data=body, content_type="application/json")
    assert response.status_code == status
    assert response.get_json()["error"].startswith(message)


def test_other_content_types_are_a_415(client):
    response = client.post("/api/events", data="events=1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert "application/json or text/plain" in response.get_json()["error"]


def test_an_unknown_search_id_is_accepted_but_counted_by_no_measure(app, client):
    from analytics.report import load_report

    body = search(client, "attendance", session=SESSION)
    assert post_events(client, [{"type": "click", "search_id": "D" * 22, "task_id": "made.up", "position": 1}]).status_code == 202
    recorder(app).flush()
    today = utcnow().date()
    report = load_report(recorder(app).store, today, today)
    assert report.total.searches == 1 and report.total.clicks == 0
    assert report.unmatched_events == 1
    assert body["search_id"] != "D" * 22


# -- the flow the widget drives, and the measures it produces ------------------------------------------
def test_keystrokes_then_a_click_make_one_clicked_search(app, client):
    from analytics.report import load_report

    for partial in ("dev", "devlop", "devlopmental", "devlopmental scr"):
        search(client, partial, k=5, rerank=0, session=SESSION)
    final = search(client, "devlopmental scrn", k=5, rerank=1, session=SESSION)
    top = final["results"][0]["id"]
    assert post_events(client, [{"type": "click", "search_id": final["search_id"], "task_id": top,
                                 "position": 1}]).status_code == 202
    recorder(app).flush()
    today = utcnow().date()
    report = load_report(recorder(app).store, today, today)
    assert report.requests == 5
    assert (report.total.searches, report.total.clicked, report.total.click_through_rate) == (1, 1, 1.0)
    assert report.total.average_click_position == 1.0


def test_retention_purge_from_the_cli(app):
    store = recorder(app).store
    now = utcnow()
    store.write([SearchRecord("old-search-0000002", now - timedelta(days=91), None, "old", False, ()),
                 SearchRecord("new-search-0000002", now - timedelta(days=89), None, "new", False, ())],
                [EventRecord(now - timedelta(days=91), "old-search-0000002", "click", task_id="t", position=1),
                 EventRecord(now - timedelta(days=1), "new-search-0000002", "click", task_id="t", position=1)])
    result = app.test_cli_runner().invoke(args=["analytics", "purge"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "purged 1 searches and 1 events older than 90 days"
    assert [r["id"] for r in rows(app, "search_log")] == ["new-search-0000002"]
    assert [r["search_id"] for r in rows(app, "search_events")] == ["new-search-0000002"]
    result = app.test_cli_runner().invoke(args=["analytics", "purge", "--days", "0"])
    assert result.exit_code != 0 and "0" in result.output


def test_report_from_the_cli(app, client):
    body = search(client, "eligibility", session=SESSION)
    post_events(client, [{"type": "click", "search_id": body["search_id"], "task_id": body["results"][0]["id"],
                          "position": 1}])
    recorder(app).flush()
    result = app.test_cli_runner().invoke(args=["analytics", "report", "--days", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [d["searches"] for d in report["days"]] == [0, 1]
    assert report["total"]["click_through_rate"] == 1.0


# -- the admin page ---------------------------------------------------------------------------------
def seed_page_log(app):
    """Hand-made log: "xyzzy <b>plugh</b>" found nothing twice, each time reformulated (a related query,
    "plugh family resources": analytics.formulas.related) into a search
    whose click was on `family.resource-directory`; "menus" was shown results 3 times, never clicked."""
    now = utcnow() - timedelta(minutes=30)
    searches, events = [], []
    for n in range(2):
        session = f"session-{n:04d}"
        searches += [SearchRecord(f"nothing-{n}-000000000", now, session, "xyzzy <b>plugh</b>", True, (), True),
                     SearchRecord(f"refound-{n}-000000000", now + timedelta(seconds=40), session, "plugh family resources",
                                  True, ("family.resource-directory",))]
        events.append(EventRecord(now + timedelta(seconds=45), f"refound-{n}-000000000", "click",
                                  session_id=session, task_id="family.resource-directory", position=1))
    for n in range(3):
        searches.append(SearchRecord(f"menus-{n}-00000000000", now, f"other-{n:04d}", "menus", True, ("nutrition.menus",)))
    recorder(app).store.write(searches, events)


def test_the_analytics_page_needs_a_login(client):
    response = client.get("/admin/analytics/")
    assert response.status_code == 302 and response.headers["Location"].startswith("/admin/login")


def test_the_analytics_page_shows_charts_and_queries_to_turn_into_test_cases(app):
    seed_page_log(app)
    recorder(app).rollup(force=True)   # the page reads the daily roll-ups (tests/test_analytics_rollup.py)
    viewer, _csrf = signed_in(app, "vera")
    page = viewer.get("/admin/analytics/?days=7")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert html.count("<svg ") == 6
    assert 'href="/admin/analytics/"' in html                      # the nav link
    assert "<script" not in html and " style=" not in html and not re.search(r"\son[a-z]+=", html)
    assert "xyzzy <b>" not in html and "xyzzy &lt;b&gt;plugh&lt;/b&gt;" in html   # escaped as text
    links = re.findall(r'<a class="make-case" href="([^"]+)"', html)
    targets = [(urlsplit(link.replace("&amp;", "&")).path, parse_qs(urlsplit(link.replace("&amp;", "&")).query))
               for link in links]
    assert ("/admin/cases/new", {"query": ["xyzzy <b>plugh</b>"], "gold": ["family.resource-directory"]}) in targets
    assert ("/admin/cases/new", {"query": ["menus"]}) in targets   # low CTR, nobody found anything after it
    totals = re.search(r'<dl class="summary" id="totals">(.*?)</dl>', html, re.S).group(1)
    assert "<dt>Searches</dt><dd>7</dd>" in totals
    assert "<dt>No-result rate</dt><dd>29%</dd>" in totals          # 2 of 7
    assert "<dt>Click-through rate</dt><dd>29%</dd>" in totals      # 2 of 7
    css = viewer.get("/admin/analytics/static/analytics.css")
    assert css.status_code == 200 and css.mimetype == "text/css"


def test_the_analytics_page_with_no_data(app):
    viewer, _csrf = signed_in(app, "vera")
    html = viewer.get("/admin/analytics/?days=bogus").get_data(as_text=True)
    assert 'aria-current="page">Last 30 days' in html
    assert html.count(">no data<") == 5            # every rate; searches per day is a line of zeros
    assert html.count("<circle ") == 30
    assert "None in this period." in html


# -- CORS ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/search?q=lead", "/api/kb/search?corpus=none&q=lead"])
def test_an_allowed_origin_gets_its_origin_back(client, path):
    response = client.get(path, headers={"Origin": ORIGIN})
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "Origin" in response.headers.get("Vary", "")
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_another_origin_gets_no_cors_header_but_vary(client):
    response = client.get("/api/search?q=lead", headers={"Origin": "https://evil.example.com"})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Origin" in response.headers["Vary"]


def test_events_carry_cors_headers_on_errors_too(client):
    response = client.post("/api/events", data="{}", content_type="application/json", headers={"Origin": ORIGIN})
    assert response.status_code == 400 and response.headers["Access-Control-Allow-Origin"] == ORIGIN


@pytest.mark.parametrize("path, method, headers", [
    ("/api/search", "GET", "authorization"),
    ("/api/events", "POST", "Content-Type"),
    ("/api/kb/search", "GET", ""),
])
def test_a_preflight_from_an_allowed_origin(client, path, method, headers):
    response = client.options(path, headers={"Origin": ORIGIN, "Access-Control-Request-Method": method,
                                             "Access-Control-Request-Headers": headers})
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert response.headers["Access-Control-Allow-Methods"] == method
    assert response.headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type"
    assert int(response.headers["Access-Control-Max-Age"]) > 0
    assert "Origin" in response.headers["Vary"]
    assert "Access-Control-Allow-Credentials" not in response.headers


@pytest.mark.parametrize("origin, method, headers, message", [
    ("https://evil.example.com", "GET", "", "origin 'https://evil.example.com' is not allowed"),
    (ORIGIN, "DELETE", "", "method 'DELETE' is not allowed on /api/search; use GET"),
    (ORIGIN, "GET", "Authorization, X-Custom", "request header 'X-Custom' is not allowed"),
])
def test_a_preflight_that_is_not_allowed_is_a_403_saying_why(client, origin, method, headers, message):
    response = client.options("/api/search", headers={"Origin": origin, "Access-Control-Request-Method": method,
                                                      "Access-Control-Request-Headers": headers})
    assert response.status_code == 403
    assert response.get_json()["error"].startswith(message)


def test_admin_and_other_paths_get_no_cors_headers(client):
    for path in ("/healthz", "/admin/login"):
        response = client.get(path, headers={"Origin": ORIGIN})
        assert "Access-Control-Allow-Origin" not in response.headers


def test_without_an_allow_list_the_api_is_same_origin_only(demo_app):
    client = demo_app.test_client()
    response = client.get("/api/search?q=lead", headers={"Origin": ORIGIN})
    assert response.status_code == 200 and "Access-Control-Allow-Origin" not in response.headers
    preflight = client.options("/api/events", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403 and "Access-Control-Allow-Origin" not in preflight.headers


def test_a_wildcard_answers_any_origin_with_a_star_and_never_credentials():
    from api.cors import CorsPolicy

    policy = CorsPolicy(("*",))
    assert policy.allowed_origin("https://anyone.example") == "*"
    assert policy.allowed_origin(None) is None
    assert policy.refusal("https://anyone.example", "/api/events", "POST", ["content-type"]) is None
    listed = CorsPolicy(("https://a.example",))
    assert listed.allowed_origin("https://A.example") == "https://A.example"
    assert listed.allowed_origin("https://a.example.evil.com") is None


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


# -- learning from use: events bound to their search (issue 17 item 4, issue 16 item 3) ------------
def test_through_the_api_a_forged_click_on_someone_else_s_k50_search_counts_nowhere(app, client):
    """Today's attack: search with k=50 and vote for any task. Another session's click on that
    search, and the searcher's own click on result 37, count neither in the measures nor as
    learned evidence (on both databases)."""
    from analytics.learning import aggregate, load_learned
    from settings import Settings

    body = search(client, "eligibility", session=SESSION, k=50)
    results = [row["id"] for row in body["results"]]
    post_events(client, [{"type": "click", "search_id": body["search_id"], "task_id": results[1], "position": 2}],
                session_id="attacker-0123456")
    post_events(client, [{"type": "click", "search_id": body["search_id"], "task_id": results[36], "position": 37}])
    recorder(app).flush()
    report = json.loads(app.test_cli_runner().invoke(args=["analytics", "report", "--days", "2", "--json"]).output)
    assert report["total"]["counts"]["clicks"] == 1          # only the searcher's own click, as a measure
    engine = recorder(app).store.engine
    aggregate(engine, Settings.from_env({"LEARNING_SETTLE_S": "0"}))
    assert [p for p in load_learned(engine) if p.clicks] == []   # and neither is a vote (position 37 > 10)


def test_one_address_with_too_many_sessions_binds_no_more_events(app, client):
    gate = app.extensions["taskfinder_sessions_per_address"]
    limit = gate.limit
    bodies = [search(client, "menus", session=f"bot-session-{n:06d}") for n in range(limit + 2)]
    for n, body in enumerate(bodies):
        post_events(client, [{"type": "click", "search_id": body["search_id"], "task_id": body["results"][0]["id"],
                              "position": 1}], session_id=f"bot-session-{n:06d}",
                    environ_base={"REMOTE_ADDR": "198.51.100.7"})
    recorder(app).flush()
    with recorder(app).store.engine.connect() as connection:
        sessions = [row[0] for row in connection.execute(text("SELECT session_id FROM search_events ORDER BY id"))]
    assert len(sessions) == limit + 2
    assert sessions[:limit] == [f"bot-session-{n:06d}" for n in range(limit)]
    assert sessions[limit:] == [None, None]                  # stored unbound: no measure, no vote

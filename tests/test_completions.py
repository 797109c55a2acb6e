"""Query completions under the search box (search.completions, api.completions): the pure module on
hand-made catalogs, the popular searches read from the analytics tables on SQLite and PostgreSQL,
and the `completions` of /api/search on a real app (embedded SQLite, no embeddings) fed by real
searches and click events: restricted words never reach a caller outside the roles, one session's
query is never offered, a query clicked by three sessions is."""
from __future__ import annotations

import json
import statistics
import time
from datetime import datetime, timedelta, timezone

import pytest

from analytics.records import EventRecord, SearchRecord
from analytics.store import AnalyticsStore
from api.completions import LiveCompletions, read_popular
from api.roles import sign_role_token
from api.search import COMPLETIONS
from catalog.records import CaseRecord, TaskRecord
from search.completions import (MAX_COMPLETION_CHARS, Completion, Completions, PopularSearch, popular_searches,
                                still_answered, typed_words)
from tests.conftest import build_app, close_app, make_settings

IMM = TaskRecord(id="h.imm", name="Immunization Records", help="Record vaccines and exemptions.", category="health")
SCR = TaskRecord(id="h.scr", name="Developmental Screening", help="ASQ-3 screening within 45 days.", category="health")
BUS = TaskRecord(id="t.bus", name="Bus Routes", help="Plan routes, stops and the bus schedule.", category="transportation")
PAY = TaskRecord(id="x.pay", name="Payroll Export", help="Export the salary run to the bank.", category="fiscal",
                 aliases=("Salary Run",), roles=("fiscal",))
TASKS = (IMM, SCR, BUS, PAY)


def texts(found: list[Completion]) -> list[str]:
    return [c.text for c in found]


def popular(query: str, sessions: int, *clicked: str) -> PopularSearch:
    return PopularSearch(query, sessions, tuple(sorted(clicked)))


# -- typed words and matching -------------------------------------------------------------------------
def test_typed_words_use_the_product_pipeline_and_keep_a_stopword_being_typed():
    assert typed_words("ASQ-3") == ["asq", "3", "asq3"]
    assert typed_words("im") == ["im"]                     # a stopword, but maybe "immunization" half typed
    assert typed_words("how to  im") == ["im"]             # whole stopwords earlier are dropped
    assert typed_words("Vaccine in") == ["vaccine", "in"]
    assert typed_words("what's") == []                     # a finished contraction is no prefix of anything


def test_each_typed_word_prefixes_a_word_of_the_suggestion_in_any_order_ignoring_case_and_accents():
    completions = Completions(TASKS, [])
    assert texts(completions.complete("imm")) == ["Immunization Records"]
    assert texts(completions.complete("REC IMMU")) == ["Immunization Records"]
    assert texts(completions.complete("immunizatión rec")) == ["Immunization Records"]
    assert texts(completions.complete("asq")) == []            # help text is not a suggestion
    assert texts(completions.complete("immunization bus")) == []  # every typed word must match
    assert texts(completions.complete("mmun")) == []           # a prefix, not a substring


def test_what_was_typed_is_never_suggested_back():
    completions = Completions(TASKS, [CaseRecord("bus routes map", ("t.bus",))])
    assert texts(completions.complete("bus routes")) == ["bus routes map"]
    assert texts(completions.complete("  BUS   Routes ")) == ["bus routes map"]


def test_duplicates_are_one_suggestion_written_as_the_catalog_writes_it():
    completions = Completions(TASKS, [CaseRecord("bus routes", ("t.bus",))], [popular("BUS  routes", 3, "t.bus")])
    assert [c.as_dict() for c in completions.complete("bus")] == [{"text": "Bus Routes", "source": "search"}]


def test_order_is_sessions_then_cases_then_tasks_ties_alphabetical_at_most_the_limit():
    tasks = (*TASKS, TaskRecord(id="t.b", name="Bus Badges"), TaskRecord(id="t.a", name="Bus Attendance"))
    cases = [CaseRecord("bus driver", ("t.bus",)), CaseRecord("bus driver", ("t.bus", "h.imm")),
             CaseRecord("bus pass", ("t.bus",)), CaseRecord("bus monitor", ("t.bus",))]
    found = Completions(tasks, cases, [popular("bus stops", 3, "t.bus"), popular("bus schedule", 4, "t.bus")])
    assert [c.as_dict() for c in found.complete("bus", limit=10)] == [
        {"text": "bus schedule", "source": "search"}, {"text": "bus stops", "source": "search"},
        {"text": "bus driver", "source": "case"},            # two cases: before the single ones
        {"text": "bus monitor", "source": "case"}, {"text": "bus pass", "source": "case"},
        {"text": "Bus Attendance", "source": "task"}, {"text": "Bus Badges", "source": "task"},
        {"text": "Bus Routes", "source": "task"}]
    assert len(found.complete("bus")) == 5


# -- what may be offered ------------------------------------------------------------------------------
def test_off_topic_misspelt_and_sentence_long_cases_are_never_offered():
    cases = [CaseRecord("bus weather forecast", ()),                     # out of scope: off-topic
             CaseRecord("imunizations", ("h.imm",)),                      # a typo, on purpose
             CaseRecord("immunizations", ("h.imm",)),                     # the catalog's word, plural
             CaseRecord("bus " + "and more words " * 5, ("t.bus",)),      # a sentence, not a query
             CaseRecord("bus nowhere", ("t.gone",))]                      # gold not in the catalog
    completions = Completions(TASKS, cases)
    assert texts(completions.complete("bus")) == ["Bus Routes"]
    assert texts(completions.complete("imu")) == []
    assert texts(completions.complete("immunization r")) == ["Immunization Records"]
    assert texts(completions.complete("immu")) == ["immunizations", "Immunization Records"]
    assert len("bus " + "and more words " * 5) > MAX_COMPLETION_CHARS


def test_a_restricted_tasks_words_reach_only_its_roles():
    cases = [CaseRecord("payroll batch", ("x.pay",)),                 # gold restricted
             CaseRecord("salary advance for bus drivers", ("t.bus",))]  # public gold, but a hidden word
    found = Completions(TASKS, cases, [popular("export payroll csv", 5, "x.pay"),
                                       popular("bus payroll", 4, "t.bus", "x.pay")])
    fiscal = frozenset({"fiscal"})
    for prefix in ("p", "pay", "payroll", "sal", "salary", "export", "bus", "batch", "run"):
        shown = " ".join(texts(found.complete(prefix, limit=50))).lower()
        assert "payroll" not in shown and "salary" not in shown, prefix
    assert texts(found.complete("pay", fiscal)) == ["export payroll csv", "bus payroll", "payroll batch",
                                                    "Payroll Export"]
    assert texts(found.complete("sal", fiscal)) == ["salary advance for bus drivers", "Salary Run"]


def test_a_search_needs_every_clicked_task_visible_and_still_in_the_catalog():
    found = Completions(TASKS, [], [popular("bus and shots", 3, "t.bus", "h.imm"), popular("bus gone", 9, "t.gone")])
    assert texts(found.complete("bus")) == ["bus and shots", "Bus Routes"]


# -- popular searches ---------------------------------------------------------------------------------
def test_popular_searches_count_distinct_sessions_that_clicked_a_shown_result():
    clicks = [("bus timetable", f"s{i}", "t.bus", ("t.bus", "h.imm")) for i in range(3)]
    clicks += [("bus depot", "solo", "t.bus", ("t.bus",))] * 7                 # one session, many clicks
    clicks += [("bus garage", "s1", "t.bus", ("t.bus",)), ("bus garage", "s2", "t.bus", ("t.bus",)),
               ("bus garage", None, "t.bus", ("t.bus",)),                        # no session: binds nothing
               ("bus garage", "s3", "h.imm", ("t.bus",))]                       # not a task it showed
    assert popular_searches(clicks, 3) == (PopularSearch("bus timetable", 3, ("t.bus",)),)
    assert popular_searches(clicks, 2) == (PopularSearch("bus garage", 2, ("t.bus",)),
                                           PopularSearch("bus timetable", 3, ("t.bus",)))
    assert [p.query for p in popular_searches(clicks, 1)] == ["bus garage", "bus timetable"]  # never one session


def test_a_query_last_answered_without_a_confident_match_is_dropped():
    found = (popular("bus timetable", 3, "t.bus"), popular("weather", 4, "t.bus"))
    assert still_answered(found, {"weather"}) == (popular("bus timetable", 3, "t.bus"),)


def test_a_keystroke_is_a_lookup_not_a_scan(demo_tasks, demo_cases):
    completions = Completions(demo_tasks, demo_cases)
    timings = []
    for query in ("a", "s", "asq", "imm rec", "bus d", "family partner") * 50:
        started = time.perf_counter()
        completions.complete(query)
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 200e-6, statistics.median(timings)


# -- reading the popular searches from the analytics tables (SQLite and PostgreSQL) ---------------------
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


def logged(store: AnalyticsStore, query: str, session: str, minute: int, shown=("t.bus",), clicked="t.bus",
           unanswered: bool = False) -> None:
    at = NOW + timedelta(minutes=minute)
    search = SearchRecord(id=f"{query}-{session}-{minute}".replace(" ", "_"), at=at, session_id=session,
                          query=query, rerank=False, result_ids=() if unanswered else tuple(shown),
                          no_confident_match=unanswered)
    events = [] if unanswered or clicked is None else [
        EventRecord(at=at, search_id=search.id, type="click", session_id=session, task_id=clicked, position=1)]
    store.write([search], events)


def test_read_popular_binds_clicks_to_their_sessions_and_drops_queries_now_unanswered(engine):
    store = AnalyticsStore(engine)
    for i in range(3):
        logged(store, "bus timetable", f"session-{i}", i)
        logged(store, "bus stops", f"session-{i}", i)
        logged(store, "bus garage", f"session-{i}", i, clicked="h.imm")     # a task the search did not show
    logged(store, "bus stops", "session-9", 30, unanswered=True)           # its latest answer: none
    for minute in range(5):
        logged(store, "bus depot", "solo-session", minute)                 # one session, five clicks
    forged = SearchRecord(id="forged-search", at=NOW, session_id="owner-session", query="bus forged", rerank=False,
                          result_ids=("t.bus",))
    store.write([forged], [EventRecord(at=NOW, search_id=forged.id, type="click", session_id=f"other-{i}",
                                       task_id="t.bus", position=1) for i in range(3)])   # not the search's session
    assert read_popular(store, 3) == (PopularSearch("bus timetable", 3, ("t.bus",)),)


# -- through /api/search --------------------------------------------------------------------------------
SECRET = "s" * 40


@pytest.fixture(scope="module")
def app(tmp_path_factory, shared_cache_dir):
    settings = make_settings(tmp_path_factory.mktemp("completions"), shared_cache_dir, EMBEDDINGS_ENABLED="0",
                             ROLE_TOKEN_SECRET=SECRET, ANALYTICS_FLUSH_INTERVAL_S="3600")
    cases = [CaseRecord("payroll batch", ("x.pay",)), CaseRecord("vaccine shots", ("h.imm",))]
    app = build_app(settings, TASKS, cases)
    yield app
    close_app(app)


def search(client, q: str, session: str | None = None, token: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.get("/api/search", query_string={"q": q, **({"session": session} if session else {})},
                          headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def search_and_click(client, q: str, session: str, task_id: str, token: str | None = None) -> None:
    body = search(client, q, session, token)
    position = [row["id"] for row in body["results"]].index(task_id) + 1
    event = {"type": "click", "search_id": body["search_id"], "task_id": task_id, "position": position}
    response = client.post("/api/events", data=json.dumps({"session_id": session, "events": [event]}),
                           content_type="application/json")
    assert response.status_code == 202, response.get_data(as_text=True)


def refreshed(app) -> None:
    """What the timer does in the background: the logged searches and clicks written, then read."""
    app.extensions["taskfinder_analytics"].flush()
    app.extensions[COMPLETIONS].refresh_popular()


def test_completions_come_with_every_answer(app):
    body = search(app.test_client(), "imm")
    assert body["completions"] == [{"text": "Immunization Records", "source": "task"}]
    assert search(app.test_client(), "🚌")["completions"] == []


def test_a_query_clicked_by_three_sessions_is_offered_one_sessions_query_never(app):
    client = app.test_client()
    for i in range(3):
        search_and_click(client, "bus timetable", f"commuter-{i:04d}", "t.bus")
    for _ in range(4):
        search_and_click(client, "bus depot keys", "lone-session-0001", "t.bus")
    for i in range(2):
        search_and_click(client, "bus garage", f"mechanic-{i:04d}", "t.bus")
    refreshed(app)
    assert search(client, "bus")["completions"] == [{"text": "bus timetable", "source": "search"},
                                                   {"text": "Bus Routes", "source": "task"}]
    assert search(client, "bus dep")["completions"] == []
    assert search(client, "bus gar")["completions"] == []


def test_restricted_words_never_reach_an_anonymous_caller(app):
    client = app.test_client()
    fiscal = sign_role_token(SECRET, ["fiscal"], 300)
    for i in range(3):
        search_and_click(client, "payroll export monthly", f"clerk-{i:04d}", "x.pay", token=fiscal)
    refreshed(app)
    for word in ("payroll export monthly", "salary run", "payroll batch"):
        for end in range(1, len(word) + 1):
            shown = json.dumps(search(client, word[:end])["completions"]).lower()
            assert "payroll" not in shown and "salary" not in shown, word[:end]
            forged = json.dumps(search(client, word[:end], token="not.a.token")["completions"]).lower()
            assert "payroll" not in forged and "salary" not in forged, word[:end]
    assert search(client, "pay", token=fiscal)["completions"] == [
        {"text": "payroll export monthly", "source": "search"}, {"text": "payroll batch", "source": "case"},
        {"text": "Payroll Export", "source": "task"}]


def test_a_failed_read_keeps_the_previous_popular_searches(app):
    reads = iter([(popular("bus timetable", 3, "t.bus"),), RuntimeError("database down")])

    def read():
        value = next(reads)
        if isinstance(value, Exception):
            raise value
        return value

    now = [0.0]
    live = app.extensions["taskfinder"].search.live()
    completions = LiveCompletions(read, refresh_s=60, clock=lambda: now[0])
    assert completions.complete(live, "bus", frozenset())[0] == {"text": "bus timetable", "source": "search"}
    completions.refresh_popular()      # fails: logged, the previous read keeps serving
    assert completions.complete(live, "bus", frozenset())[0] == {"text": "bus timetable", "source": "search"}

"""Issue 17 items 1, 5 and 7: malformed input is refused at the edge with a 4xx that names the
field (never a 500, never a row that a writer cannot store), and the analytics writer isolates
a row the database refuses instead of dropping the innocent rows queued beside it."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from analytics.models import SearchEvent, SearchLogEntry
from analytics.recorder import AnalyticsRecorder, RecorderConfig
from analytics.records import EventRecord, SearchRecord, new_search_id
from analytics.store import AnalyticsStore
from catalog.formats import ImportRejected, load_cases_bytes, load_tasks_bytes
from catalog.models import utcnow
from catalog.validation import MAX_INT64, bounded_int, json_problem, text_problem, url_problem

SESSION = "sess-0123456789"
SEARCH_ID = "A" * 22


def post_events(client, body: dict | str):
    data = body if isinstance(body, str) else json.dumps(body)   # ensure_ascii: "\ud800" travels escaped
    return client.post("/api/events", data=data, content_type="application/json")


# -- item 1: text at the edge ---------------------------------------------------------------------
@pytest.mark.parametrize("event", [
    {"type": "click", "search_id": SEARCH_ID, "task_id": "\ud800", "position": 1},
    {"type": "click", "search_id": SEARCH_ID, "task_id": "ok\x00", "position": 1},
    {"type": "return", "search_id": SEARCH_ID, "task_id": "a/b"},
    {"type": "impression", "search_id": SEARCH_ID, "query": "lead \udfff", "task_ids": ["x"]},
    {"type": "impression", "search_id": SEARCH_ID, "query": "lead", "task_ids": ["x", "\ud83d"]},
])
def test_an_event_with_a_lone_surrogate_or_control_character_is_a_400(client, event):
    response = post_events(client, {"session_id": SESSION, "events": [event]})
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"].startswith("events[0].")


def test_the_search_api_refuses_undecodable_or_control_text_without_a_500(client):
    for raw in ("/api/search?q=lead%ED%A0%80", "/api/search?q=%00lead", "/api/search?q=lead&session=%ED%A0%80abcdefgh"):
        assert client.get(raw).status_code < 500


def test_text_problem_names_the_character():
    assert text_problem("fine text, ünïcödé 😀") is None
    assert "lone surrogate" in text_problem("x\ud800")
    assert "U+0000" in text_problem("a\x00b")
    assert text_problem("two\nlines", multiline=True) is None
    assert text_problem("two\nlines") is not None
    assert json_problem({"a": [[[[[]]]]]}) is None
    deep: list = []
    for _ in range(100):
        deep = [deep]
    assert "nested deeper" in json_problem(deep)[1]


# -- item 1: the writer isolates a bad row --------------------------------------------------------
def test_a_row_the_database_refuses_costs_only_itself(engine):
    """Before: one event with a lone surrogate made the whole batch fail three times and be
    dropped, the innocent searches with it. Now they are written and the bad item alone dropped."""
    recorder = AnalyticsRecorder(AnalyticsStore(engine), RecorderConfig(queue_size=100, flush_interval_s=3600,
                                                                        retention_days=90))
    now = utcnow()
    searches = [SearchRecord(new_search_id(), now, SESSION, f"query {i}", True, ("t1",)) for i in range(5)]
    for record in searches[:3]:
        recorder.record_search(record)
    recorder.record_events([EventRecord(now, searches[0].id, "click", SESSION, "\ud800", 1)])   # past the edge
    for record in searches[3:]:
        recorder.record_search(record)
    recorder.record_events([EventRecord(now, searches[1].id, "click", SESSION, "t1", 1)])
    for _ in range(3):
        recorder.flush()
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(SearchLogEntry)) == 5
        assert connection.scalar(select(func.count()).select_from(SearchEvent)) == 1
    assert recorder.counts["search", "written"] == 5
    assert recorder.counts["events", "rejected"] == 1
    assert recorder.pending() == 0
    recorder.close()


# -- item 7: task ids and URLs other clients trust -------------------------------------------------
@pytest.mark.parametrize("url", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<b>x</b>",
                                 "vbscript:x", "file:///etc/passwd", " javascript:alert(1)", "http:/no-host"])
def test_a_task_url_that_is_not_http_or_relative_is_refused_at_import(url):
    row = {"id": "t.ok", "name": "A task", "help": "", "url": url}
    with pytest.raises(ImportRejected) as caught:
        load_tasks_bytes(json.dumps(row).encode(), "catalog.jsonl")
    assert "line 1: field 'url'" in caught.value.errors[0]


@pytest.mark.parametrize("url", ["https://example.org/tasks/1", "http://host:8080/x?y=1", "/tasks/enrol", "tasks/enrol",
                                 "#anchor"])
def test_http_and_relative_task_urls_are_accepted(url):
    assert url_problem(url) is None
    row = {"id": "t.ok", "name": "A task", "help": "", "url": url}
    [task] = load_tasks_bytes(json.dumps(row).encode(), "catalog.jsonl")
    assert task.url == url


def test_a_task_id_with_a_slash_is_refused_at_import_naming_the_row():
    rows = [{"id": "t.ok", "name": "A", "help": ""}, {"id": "finance/claims", "name": "B", "help": ""}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    with pytest.raises(ImportRejected) as caught:
        load_tasks_bytes(text.encode(), "catalog.jsonl")
    assert caught.value.errors == ["line 2: field 'id': must not contain '/' (it is part of the task's address "
                                   "in the editor)"]
    csv_text = "id,name,help,url\nt.a,A,,javascript:alert(1)\n"
    with pytest.raises(ImportRejected) as caught:
        load_tasks_bytes(csv_text.encode(), "catalog.csv")
    assert caught.value.errors[0].startswith("line 2: field 'url': scheme 'javascript:'")


# -- item 5: imports with deep nesting, huge numbers, bad text -------------------------------------
@pytest.mark.parametrize("line", [
    "[" * 100_000 + "]" * 100_000,                                   # RecursionError in json
    '{"id": "t", "name": "A", "help": "", "active": ' + "9" * 5000 + "}",   # ValueError: int digits limit
    '{"id": "t", "name": "A", "help": "", "aliases": ' + "[" * 50 + "]" * 50 + "}",
    '{"id": "t\\u0000", "name": "A", "help": ""}',
    '{"id": "t", "name": "A\\ud800", "help": ""}',
])
def test_a_malformed_import_line_is_refused_naming_the_line(line):
    with pytest.raises(ImportRejected) as caught:
        load_tasks_bytes((line + "\n").encode(), "catalog.jsonl")
    assert caught.value.errors[0].startswith("line 1:")


def test_a_case_query_with_a_lone_surrogate_or_nul_is_refused():
    for query in ("lead\ud800", "lead\x00screening"):
        with pytest.raises(ImportRejected) as caught:
            load_cases_bytes((json.dumps({"query": query, "gold": []}) + "\n").encode(), "cases.jsonl", set())
        assert caught.value.errors[0].startswith("line 1: field 'query': contains")


def test_bounded_int():
    assert bounded_int("42") == 42
    assert bounded_int(str(MAX_INT64)) == MAX_INT64
    assert bounded_int(str(MAX_INT64 + 1)) is None
    assert bounded_int("9" * 5000) is None
    assert bounded_int("²") is None and bounded_int(True) is None and bounded_int("-1") is None

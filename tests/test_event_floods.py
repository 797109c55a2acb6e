"""Issue 17 item 6: an events flood is capped per session and overall (bounded storage), and
impressions are stored compactly, on SQLite and PostgreSQL."""
from __future__ import annotations

import json
import time

import pytest
from limits.storage import MemoryStorage
from sqlalchemy import func, select

from analytics.budget import Admission, EventBudget
from analytics.models import SearchEvent
from analytics.records import EventRecord
from catalog.models import utcnow
from tests.conftest import build_app, make_settings, postgres_schema

SID = "E" * 22


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request, tmp_path, shared_cache_dir, demo_tasks):
    env = {"ANALYTICS_FLUSH_INTERVAL_S": "3600", "EMBEDDINGS_ENABLED": "0",
           "ANALYTICS_SESSION_EVENTS_PER_MINUTE": "100", "ANALYTICS_EVENTS_PER_MINUTE": "300"}
    if request.param == "sqlite":
        app = build_app(make_settings(tmp_path, shared_cache_dir, **env), demo_tasks[:5], [])
        yield app
        app.extensions["taskfinder_analytics"].close()
        return
    with postgres_schema() as (_schema, url):
        app = build_app(make_settings(tmp_path, shared_cache_dir, DATABASE_URL=url, **env), demo_tasks[:5], [])
        yield app
        app.extensions["taskfinder_analytics"].close()
        app.extensions["taskfinder"].store.engine.dispose()


def post(client, session: str, events: list[dict]):
    return client.post("/api/events", data=json.dumps({"session_id": session, "events": events}),
                       content_type="application/json")


def stored(app) -> int:
    recorder = app.extensions["taskfinder_analytics"]
    recorder.flush()
    with recorder.store.engine.connect() as connection:
        return connection.scalar(select(func.count()).select_from(SearchEvent))


def clicks(n: int) -> list[dict]:
    return [{"type": "click", "search_id": SID, "task_id": f"t.{i}", "position": 1} for i in range(n)]


def test_a_flood_is_capped_per_session_and_overall(app):
    """Before: every one of 300 posts in a second was accepted and stored."""
    client = app.test_client()
    assert [post(client, "flooder-0001", clicks(50)).status_code for _ in range(3)] == [202, 202, 429]
    refused = post(client, "flooder-0001", clicks(1))
    assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "nothing was stored" in refused.get_json()["error"]
    statuses = [post(client, f"flooder-{n:04d}", clicks(50)).status_code for n in range(2, 12)]
    assert statuses.count(202) == 4 and statuses[4:] == [429] * 6     # 300 a minute from everyone
    assert stored(app) == 300
    assert app.extensions["taskfinder_analytics"].counts["events", "over_cap"] == 50 + 1 + 6 * 50


def test_impressions_are_stored_once_per_search_with_their_task_ids_once(app):
    client = app.test_client()
    impression = {"type": "impression", "search_id": SID, "query": "Lead  Screening", "task_ids": ["a", "b", "a", "c"]}
    first = post(client, "viewer-0001", [impression, impression])
    assert first.status_code == 202 and first.get_json() == {"accepted": 1}
    assert post(client, "viewer-0001", [impression]).get_json() == {"accepted": 0}
    assert stored(app) == 1
    recorder = app.extensions["taskfinder_analytics"]
    [row] = recorder.store.events(utcnow().replace(year=2000), utcnow().replace(year=2100))
    assert row.task_ids == ("a", "b", "c") and row.query == "lead screening"


def test_the_budget_window_rolls_over():
    """Moving windows (analytics.budget, issue 33); a one-second one here, a minute in the app."""
    budget = EventBudget(MemoryStorage(), per_session=3, per_address=100, total=5, window_s=1)
    event = EventRecord(utcnow(), SID, "click", "s-00000001", "t", 1)
    assert budget.admit("192.0.2.1", "s-00000001", [event] * 3).refused_by is None
    assert budget.admit("192.0.2.1", "s-00000001", [event]) == Admission(refused_by="session", retry_after_s=1)
    assert budget.admit("192.0.2.2", "s-00000002", [event] * 3).refused_by == "everyone"   # 3 + 3 > 5 overall
    time.sleep(1.1)
    admission = budget.admit("192.0.2.1", "s-00000001", [event] * 3)
    assert admission.refused_by is None and len(admission.events) == 3

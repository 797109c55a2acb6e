"""Issue 33 items 3 and 4: the flood caps of POST /api/events (analytics.budget) are shared by
every worker through Redis, bound each client (session and address, session-less posts
included), and a flood from a few addresses cannot make another client's posts answer 429.

Real Redis (127.0.0.1:6379, or TEST_REDIS_URL), each test under its own key prefix. "Two
workers" are two apps built from the same settings, as in tests/test_rate_limits.py: each has
its own in-process state and shares only Redis, as gunicorn workers do (each calls create_app).
Each worker has its own SQLite file, so what the pair stored is the sum of the two.
"""
from __future__ import annotations

import json
import math
import time

import pytest
from limits.storage import MemoryStorage
from sqlalchemy import func, select

from analytics.budget import EventBudget
from analytics.models import SearchEvent
from analytics.records import EventRecord
from catalog.models import utcnow
from catalog.records import TaskRecord
from settings import Settings
from tests.conftest import REDIS_URL, build_app, close_app, make_settings

DOWN_REDIS_URL = "redis://127.0.0.1:1/0"   # nothing listens on port 1
TASKS = [TaskRecord(id="lead", name="Lead Screening", help="Blood lead level results.", category="health")]
SID = "E" * 22
VICTIM = "203.0.113.77"


@pytest.fixture
def workers(tmp_path, shared_cache_dir):
    """make(name, **env): one worker (an app) over Redis with the given caps; closed afterwards."""
    made = []

    def make(name: str, **env):
        settings = make_settings(tmp_path / name, shared_cache_dir, EMBEDDINGS_ENABLED="0", SECRET_KEY="k" * 40,
                                 ANALYTICS_FLUSH_INTERVAL_S="3600", **env)
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        app = build_app(settings, TASKS, [])
        made.append(app)
        return app

    yield make
    for app in made:
        close_app(app)


def post(app, n: int, address: str, session: str | None = None):
    """`n` clicks posted from `address`, with `session` as its session id (None: session-less)."""
    body = {"events": [{"type": "click", "search_id": SID, "task_id": f"t.{i}", "position": 1} for i in range(n)]}
    if session is not None:
        body["session_id"] = session
    return app.test_client().post("/api/events", data=json.dumps(body), content_type="application/json",
                                  environ_base={"REMOTE_ADDR": address})


def accepted(responses) -> int:
    return sum(r.get_json()["accepted"] for r in responses if r.status_code == 202)


def stored(*apps) -> int:
    """Events rows the apps wrote (each worker has its own SQLite file here)."""
    total = 0
    for app in apps:
        recorder = app.extensions["taskfinder_analytics"]
        recorder.flush()
        with recorder.store.engine.connect() as connection:
            total += connection.scalar(select(func.count()).select_from(SearchEvent))
    return total


def flood(apps, posts: int, n: int, address: str, session=lambda i: "flooder-0001"):
    """`posts` posts of `n` events from `address`, sent to the workers in turn."""
    return [post(apps[i % len(apps)], n, address, session(i)) for i in range(posts)]


# -- one session: one cap for every worker -----------------------------------------------------
def test_two_workers_together_store_no_more_of_one_session_than_one_process(workers, prefix):
    """Before: each worker counted alone, so two workers stored twice one process's cap
    (the audit: 100/min on one process, 250 on 2 workers, 400 on 4)."""
    env = {"REDIS_URL": REDIS_URL, "ANALYTICS_SESSION_EVENTS_PER_MINUTE": "100"}
    single = workers("single", REDIS_KEY_PREFIX=prefix + "one:", **env)
    one_process = accepted(flood([single], posts=30, n=10, address="198.51.100.1"))
    pair = [workers("a", REDIS_KEY_PREFIX=prefix, **env), workers("b", REDIS_KEY_PREFIX=prefix, **env)]
    answers = flood(pair, posts=30, n=10, address="198.51.100.1")
    two_workers = accepted(answers)
    assert one_process == 100
    assert one_process <= two_workers <= 1.1 * one_process
    assert stored(*pair) == two_workers
    refused = answers[-1]
    assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "this session" in refused.get_json()["error"] and "nothing was stored" in refused.get_json()["error"]


# -- one address: capped with or without a session id -----------------------------------------
def test_a_session_less_flood_from_one_address_is_capped_across_workers(workers, prefix):
    """Before: a session-less post had no cap but the global one (the audit: 19,900 events a
    minute from one address on one process, 30,000 on two workers)."""
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE": "200"}
    pair = [workers("a", **env), workers("b", **env)]
    answers = flood(pair, posts=40, n=25, address="198.51.100.2", session=lambda i: None)
    assert accepted(answers) == 200 == stored(*pair)
    assert "this address" in answers[-1].get_json()["error"]
    assert pair[1].extensions["taskfinder_analytics"].counts["events", "over_cap"] > 0
    assert post(pair[0], 5, "198.51.100.3").status_code == 202       # another address is not held up


def test_a_new_session_id_per_post_does_not_lift_the_address_cap(workers, prefix):
    """Session ids are made up by the caller: a fresh one per post must not buy a fresh budget."""
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE": "200"}
    pair = [workers("a", **env), workers("b", **env)]
    answers = flood(pair, posts=20, n=25, address="198.51.100.4", session=lambda i: f"rotating-{i:04d}")
    assert accepted(answers) == 200


# -- fairness: a few flooding addresses cannot exhaust the cap of everyone ---------------------
def test_a_flood_from_a_few_addresses_does_not_refuse_another_clients_posts(workers, prefix):
    """Before: 4 flooding addresses used up the cap of everyone, and 38 of a victim's 56 posts
    answered 429. Here the caps keep their default ratio (the global cap takes 10 addresses at
    their own cap to reach); 4 addresses flood both workers, as hard as they can, while a
    victim posts in between."""
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "ANALYTICS_EVENTS_PER_MINUTE": "2000",
           "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE": "200", "ANALYTICS_SESSION_EVENTS_PER_MINUTE": "160"}
    pair = [workers("a", **env), workers("b", **env)]
    attackers = [f"192.0.2.{i}" for i in range(1, 5)]
    victim = []
    for round_ in range(15):
        for k, address in enumerate(attackers):   # fresh session ids: only the address cap holds them
            post(pair[(round_ + k) % 2], 50, address, f"attack-{k}-{round_:04d}")
            post(pair[(round_ + k + 1) % 2], 50, address)
        victim.append(post(pair[round_ % 2], 10, VICTIM, "victim-session-1"))
    assert [r.status_code for r in victim] == [202] * 15
    assert stored(*pair) == 4 * 200 + 15 * 10


def test_the_default_caps_take_many_addresses_to_reach_the_cap_of_everyone():
    """The global cap is a last-resort valve: with the defaults, tens of addresses each
    flooding at its own cap are needed to reach it (analytics.budget explains the choice)."""
    defaults = Settings()
    assert math.ceil(defaults.analytics_events_per_minute / defaults.analytics_address_events_per_minute) >= 30
    assert defaults.analytics_session_events_per_minute <= defaults.analytics_address_events_per_minute


# -- without Redis ------------------------------------------------------------------------------
def test_while_redis_is_down_each_worker_still_caps_what_it_stores(workers):
    """The caps bound rows written to the database: a Redis outage makes them per process
    (as without REDIS_URL), never open."""
    app = workers("down", REDIS_URL=DOWN_REDIS_URL, ANALYTICS_SESSION_EVENTS_PER_MINUTE="100",
                  ANALYTICS_ADDRESS_EVENTS_PER_MINUTE="150")
    assert accepted(flood([app], posts=15, n=10, address="198.51.100.5")) == 100
    assert accepted(flood([app], posts=15, n=10, address="198.51.100.5", session=lambda i: None)) == 50


def test_the_windows_move():
    """A one-second window (the real one is a minute): what left the window is free again."""
    budget = EventBudget(MemoryStorage(), per_session=3, per_address=4, total=100, window_s=1)
    event = EventRecord(utcnow(), SID, "click", "s-00000001", "t", 1)
    assert budget.admit("192.0.2.9", "s-00000001", [event] * 3).refused_by is None
    over = budget.admit("192.0.2.9", "s-00000001", [event])
    assert over.refused_by == "session" and over.events == [] and over.retry_after_s == 1
    assert budget.admit("192.0.2.9", "s-00000002", [event] * 2).refused_by == "address"   # 3 + 2 > 4
    time.sleep(1.1)
    admitted = budget.admit("192.0.2.9", "s-00000001", [event] * 3)
    assert admitted.refused_by is None and len(admitted.events) == 3

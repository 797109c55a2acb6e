"""Synthetic logged traffic for the learned-evidence case of ops/bench_scale.py (issue 16).

`log_traffic` writes N searches, each with the widget's impression and its clicks, into a real
(migrated, SQLite) analytics database through the product's own writer (AnalyticsStore.write);
`aggregate_traffic` then times the product's aggregation (analytics.learning.aggregate) that
turns them into learned_evidence, off the request path, and reads back what the fit would use.

The traffic. A pool of distinct queries (their gold task drawn by the same Zipf popularity as
the test cases, their words like the held-out queries) is ranked once by the prefilter; each
search draws a query of the pool by a Zipf law (s = 1.0: a few queries are frequent, most are
rare), a session out of `sessions` (uniformly) and a time uniformly in the last `days` days;
its results are the query's top 10. Clicks follow a position-based model: a result at position
k is examined with probability 1/k; an examined gold task is clicked with probability 0.9, any
other with 0.05 (noise); ~30% of searches end without any click (abandonment is what the model
gives, not forced).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from analytics.records import EventRecord, SearchRecord, new_search_id

SHOWN = 10              # results per search (the widget's list)
CLICK_GOLD = 0.9        # P(click | examined, gold)
CLICK_NOISE = 0.05      # P(click | examined, not gold)
WRITE_BATCH = 5_000     # searches per AnalyticsStore.write (one transaction)


@dataclass(frozen=True)
class TrafficReport:
    searches: int
    sessions: int
    distinct_queries: int
    impressions: int
    clicks: int
    write_s: float


def log_traffic(engine, pool: Sequence[str], pool_gold: Sequence[str], ranked: Sequence[Sequence[str]],
                n_searches: int, n_sessions: int, days: float, now: datetime, seed: int) -> TrafficReport:
    """Write `n_searches` searches over the query `pool` (`ranked`: each pool query's result ids,
    best first; `pool_gold`: its gold task id) with their events (module docstring)."""
    from analytics.store import AnalyticsStore

    rng = np.random.default_rng(seed)
    store = AnalyticsStore(engine)
    weights = 1.0 / np.arange(1, len(pool) + 1)
    picks = rng.choice(len(pool), size=n_searches, p=weights / weights.sum())
    sessions = rng.integers(n_sessions, size=n_searches)
    ages = np.sort(rng.uniform(0, days * 86400, size=n_searches))[::-1]
    examine = 1.0 / np.arange(1, SHOWN + 1)
    impressions = clicks = 0
    started = time.perf_counter()
    searches: list[SearchRecord] = []
    events: list[EventRecord] = []
    for i in range(n_searches):
        q = int(picks[i])
        at = now - timedelta(seconds=float(ages[i]))
        session = f"s{int(sessions[i]):07d}-bench"
        shown = tuple(ranked[q][:SHOWN])
        search_id = new_search_id(int(at.timestamp() * 1e9) + i)
        searches.append(SearchRecord(search_id, at, session, pool[q], True, shown))
        events.append(EventRecord(at, search_id, "impression", session, query=pool[q], task_ids=shown))
        impressions += 1
        u = rng.random(len(shown))
        for position, task_id in enumerate(shown, start=1):
            p = examine[position - 1] * (CLICK_GOLD if task_id == pool_gold[q] else CLICK_NOISE)
            if u[position - 1] < p:
                events.append(EventRecord(at + timedelta(seconds=2), search_id, "click", session,
                                          task_id=task_id, position=position))
                clicks += 1
        if len(searches) >= WRITE_BATCH:
            store.write(searches, events)
            searches, events = [], []
    if searches:
        store.write(searches, events)
    return TrafficReport(n_searches, n_sessions, len(pool), impressions, clicks,
                         round(time.perf_counter() - started, 2))


def analytics_engine(workdir: Path):
    """A migrated SQLite database in `workdir` (the product's schema, every migration)."""
    from catalog import db

    engine = db.make_engine(f"sqlite:///{workdir / 'traffic.db'}")
    db.upgrade(engine)
    return engine


def aggregate_traffic(engine, settings, now: datetime) -> tuple[dict, dict, list]:
    """({"wall_s", "cpu_s"}, the aggregation's report, every learned pair):
    analytics.learning.aggregate over everything logged, as the fit runs it (off the request path)."""
    from analytics.learning import aggregate, load_learned

    wall, cpu = time.perf_counter(), time.thread_time()
    report = aggregate(engine, settings, now=now)
    took = {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.thread_time() - cpu, 2)}
    return took, report, load_learned(engine)


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)

"""Benchmark of search analytics: what a search pays to be logged, how fast the writer flushes,
and how long the admin report takes over a large log.

    .venv/bin/python ops/bench_analytics.py                         # SQLite in a temp dir
    .venv/bin/python ops/bench_analytics.py --database postgresql+psycopg://postgres@127.0.0.1:5432/test

Prints medians (and the spread) of:
* queue:  AnalyticsRecorder.record_search on the request path (no database), per search;
* flush:  writing N queued searches plus one click per 3 searches, in one transaction;
* report: load_report over those rows (load + group + measures), as the admin page does.
On PostgreSQL it works in a schema of its own, dropped at the end.
"""
from __future__ import annotations

import argparse
import queue
import random
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text  # noqa: E402

from analytics.recorder import AnalyticsRecorder  # noqa: E402
from analytics.records import EventRecord, SearchRecord, new_search_id  # noqa: E402
from analytics.report import load_report  # noqa: E402
from analytics.store import AnalyticsStore  # noqa: E402
from catalog import db  # noqa: E402
from catalog.models import utcnow  # noqa: E402

WORDS = ["lead", "screening", "eligibility", "attendance", "menus", "cacfp", "claim", "asq", "hearing", "vision",
         "family", "resources", "pir", "export", "enrollment", "waitlist"]


@contextmanager
def database(url: str | None):
    if url is None:
        with tempfile.TemporaryDirectory() as directory:
            engine = db.make_engine(f"sqlite:///{directory}/bench.db")
            db.upgrade(engine)
            yield engine
            engine.dispose()
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    try:
        db.upgrade(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def synthetic(n: int, days: int, rng: random.Random) -> tuple[list[SearchRecord], list[EventRecord]]:
    """n logged requests over `days`: sessions typing 1-5 keystrokes of a 1-3 word query."""
    searches, events, now = [], [], utcnow()
    while len(searches) < n:
        session = f"bench-{len(searches):08d}"
        at = now - timedelta(seconds=rng.uniform(0, days * 86400 - 60))
        query = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
        cut = sorted(rng.sample(range(1, len(query) + 1), min(len(query), rng.randint(1, 5))))
        for i, end in enumerate(cut):
            sid = new_search_id()
            searches.append(SearchRecord(sid, at + timedelta(seconds=i), session, query[:end], i == len(cut) - 1,
                                         tuple(f"task.{rng.randint(1, 200)}" for _ in range(10))))
        if rng.random() < 0.33:
            events.append(EventRecord(at + timedelta(seconds=len(cut) + 2), searches[-1].id, "click", session,
                                      searches[-1].result_ids[0], 1))
    return searches[:n], events


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.4g} (min {min(values):.4g}, max {max(values):.4g}, runs {len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default=None, help="PostgreSQL URL (default: a temporary SQLite file)")
    parser.add_argument("--rows", type=int, default=20_000, help="logged requests (default 20000)")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    searches, events = synthetic(args.rows, args.days, rng)
    with database(args.database) as engine:
        store = AnalyticsStore(engine)
        print(f"database: {engine.dialect.name}; {len(searches)} requests, {len(events)} clicks over {args.days} days")

        queue_us = []
        for _ in range(args.runs):
            recorder = AnalyticsRecorder(store, queue_size=len(searches) + 1, flush_interval_s=3600, retention_days=90)
            started = time.perf_counter()
            for record in searches:
                recorder.record_search(record)
            queue_us.append((time.perf_counter() - started) / len(searches) * 1e6)
            recorder._queue = queue.Queue()  # discard: this part measures queueing only
            recorder.close()
        print(f"queue a search (request path, µs): {spread(queue_us)}")

        flush_s = []
        for run in range(args.runs):
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM search_events"))
                conn.execute(text("DELETE FROM search_log"))
            recorder = AnalyticsRecorder(store, queue_size=len(searches) + 1, flush_interval_s=3600, retention_days=90)
            recorder._stop.set()
            for record in searches:
                recorder._queue.put_nowait(("search", (record,)))
            recorder._queue.put_nowait(("events", tuple(events)))
            started = time.perf_counter()
            written = recorder.flush()
            flush_s.append(time.perf_counter() - started)
            assert written == len(searches) + len(events), written
        print(f"flush {len(searches) + len(events)} rows (s): {spread(flush_s)}"
              f"  -> {len(searches) / statistics.median(flush_s):,.0f} searches/s")

        today = utcnow().date()
        report_s = []
        for _ in range(args.runs):
            started = time.perf_counter()
            report = load_report(store, today - timedelta(days=args.days - 1), today)
            report_s.append(time.perf_counter() - started)
        print(f"report over {args.days} days (s): {spread(report_s)}  ({report.total.searches} searches from "
              f"{report.requests} requests, CTR {report.total.click_through_rate:.2f})")


if __name__ == "__main__":
    main()

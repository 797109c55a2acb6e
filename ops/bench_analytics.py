"""Benchmark of search analytics: what a search pays to be logged, how fast the writer flushes,
and how long the admin report takes over a large log.

    .venv/bin/python ops/bench_analytics.py                         # SQLite in a temp dir
    .venv/bin/python ops/bench_analytics.py --database postgresql+psycopg://postgres@127.0.0.1:5432/test

Prints medians (and the spread) of:
* queue:  AnalyticsRecorder.record_search on the request path (no database), per search;
* flush:  writing N queued searches plus one click per 3 searches, in one transaction;
* report: load_report over those rows (load + group + measures) from the raw log;
* page: load_rollup_report over the daily roll-ups, as the admin page does (after rolling up).

    .venv/bin/python ops/bench_analytics.py --large 10000000 --days 90   # issue 17 item 6

`--large N` skips the parts above and measures the page at scale: N logged requests over
`--days` days generated IN the database by one set-based INSERT ... SELECT (PostgreSQL's
generate_series; SQLite's recursive CTE): sessions of 3 type-ahead requests of one query from a
vocabulary of 5,000, a click on a third of them; then every day is rolled up (the writer
thread's job, timed per day) and the page's report over the whole span is timed.
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

from analytics.recorder import AnalyticsRecorder, RecorderConfig  # noqa: E402
from analytics.records import EventRecord, SearchRecord, new_search_id  # noqa: E402
from analytics.report import load_report, load_rollup_report  # noqa: E402
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


VOCABULARY = 5000
REQUESTS_PER_SESSION = 3


def vocabulary(rng: random.Random) -> list[str]:
    """VOCABULARY distinct queries of 1-3 words."""
    found: dict[str, None] = {}
    while len(found) < VOCABULARY:
        found[" ".join(rng.sample(WORDS, rng.randint(1, 3))) + f" {len(found)}"] = None
    return list(found)


# One statement per dialect: row n (0-based) is request k = n % 3 of session s = n / 3, typing the
# first (k+1)/3 of query qi; sessions are spread evenly over the span, 1 s between keystrokes.
_PG_SEARCHES = """
INSERT INTO search_log (id, at, session_id, query, rerank, result_ids, no_confident_match, degraded)
SELECT lpad(to_hex(n), 22, '0'), CAST(:start AS timestamptz) + make_interval(secs => (n / 3) * :step + n % 3),
       'bench-' || (n / 3), substr(v.q, 1, greatest(1, length(v.q) * (n % 3 + 1) / 3)), n % 3 = 2,
       json_build_array('task.' || (v.qi % 200), 'task.' || ((v.qi + 1) % 200), 'task.' || ((v.qi + 2) % 200)),
       v.qi % 17 = 0, CAST('[]' AS json)
FROM generate_series(0, :n - 1) AS n JOIN bench_vocab v ON v.qi = ((n / 3) * 7919) % :v
"""
_PG_CLICKS = """
INSERT INTO search_events (at, session_id, search_id, type, task_id, position)
SELECT l.at + interval '5 seconds', l.session_id, l.id, 'click', l.result_ids ->> 0, 1
FROM search_log l WHERE NOT l.no_confident_match AND l.rerank AND (CAST(substr(l.session_id, 7) AS bigint) % 3) = 0
"""
_SQLITE_SEARCHES = """
WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n < :n - 1)
INSERT INTO search_log (id, at, session_id, query, rerank, result_ids, no_confident_match, degraded)
SELECT printf('%022x', n), strftime('%Y-%m-%d %H:%M:%S', :start_epoch + (n / 3) * :step + n % 3, 'unixepoch') || '.000000',
       'bench-' || (n / 3), substr(v.q, 1, max(1, length(v.q) * (n % 3 + 1) / 3)), n % 3 = 2,
       json_array('task.' || (v.qi % 200), 'task.' || ((v.qi + 1) % 200), 'task.' || ((v.qi + 2) % 200)),
       v.qi % 17 = 0, '[]'
FROM c JOIN bench_vocab v ON v.qi = ((n / 3) * 7919) % :v
"""
_SQLITE_CLICKS = """
INSERT INTO search_events (at, session_id, search_id, type, task_id, position)
SELECT strftime('%Y-%m-%d %H:%M:%S', l.at, '+5 seconds') || '.000000', l.session_id, l.id, 'click',
       json_extract(l.result_ids, '$[0]'), 1
FROM search_log l WHERE NOT l.no_confident_match AND l.rerank AND CAST(substr(l.session_id, 7) AS INTEGER) % 3 = 0
"""


def generate_large(engine, n: int, days: int, rng: random.Random) -> tuple[int, int]:
    """n logged requests over the `days` days ending now, and their clicks, inserted set-based."""
    start = utcnow().replace(microsecond=0) - timedelta(days=days - 1)
    start = start.replace(hour=0, minute=0, second=0)
    step = (days * 86400 - 120) / (n / REQUESTS_PER_SESSION)
    postgres = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE bench_vocab (qi INTEGER PRIMARY KEY, q TEXT NOT NULL)"))
        conn.execute(text("INSERT INTO bench_vocab (qi, q) VALUES (:qi, :q)"),
                     [{"qi": i, "q": q} for i, q in enumerate(vocabulary(rng))])
        if postgres:
            conn.execute(text(_PG_SEARCHES), {"start": start.isoformat(), "step": step, "n": n, "v": VOCABULARY})
            clicks = conn.execute(text(_PG_CLICKS)).rowcount
        else:
            conn.execute(text(_SQLITE_SEARCHES.replace(":step", repr(step))),
                         {"start_epoch": int(start.timestamp()), "n": n, "v": VOCABULARY})
            clicks = conn.execute(text(_SQLITE_CLICKS)).rowcount
        conn.execute(text("DROP TABLE bench_vocab"))
        if postgres:
            conn.execute(text("ANALYZE search_log"))
            conn.execute(text("ANALYZE search_events"))
    return n, clicks


def large(args, engine) -> None:
    store = AnalyticsStore(engine)
    started = time.perf_counter()
    n, clicks = generate_large(engine, args.large, args.days, random.Random(1))
    print(f"database: {engine.dialect.name}; generated {n:,} requests and {clicks:,} clicks over {args.days} days "
          f"in {time.perf_counter() - started:.0f} s")
    recorder = AnalyticsRecorder(store, RecorderConfig(queue_size=10, flush_interval_s=3600, retention_days=args.days))
    today = utcnow().date()
    first = today - timedelta(days=args.days - 1)
    rollup_s = []
    for offset in range(args.days):
        started = time.perf_counter()
        recorder.rollup(days=[first + timedelta(days=offset)])
        rollup_s.append(time.perf_counter() - started)
    print(f"roll-up of one day ({n // args.days:,} requests; the writer thread's job, s): {spread(rollup_s)}; "
          f"all {args.days} days: {sum(rollup_s):.0f} s")
    page_s = []
    for _ in range(args.runs):
        started = time.perf_counter()
        report = load_rollup_report(store, first, today)
        page_s.append(time.perf_counter() - started)
    print(f"page: report over {args.days} days from the roll-ups (s): {spread(page_s)}  "
          f"({report.total.searches:,} searches from {report.requests:,} requests, "
          f"CTR {report.total.click_through_rate:.3f}, {len(report.top_queries)} top queries)")
    recorder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default=None, help="PostgreSQL URL (default: a temporary SQLite file)")
    parser.add_argument("--rows", type=int, default=20_000, help="logged requests (default 20000)")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--large", type=int, default=0,
                        help="generate this many requests in the database and time the roll-ups and the page")
    args = parser.parse_args()
    if args.large:
        with database(args.database) as engine:
            large(args, engine)
        return
    rng = random.Random(1)
    searches, events = synthetic(args.rows, args.days, rng)
    with database(args.database) as engine:
        store = AnalyticsStore(engine)
        print(f"database: {engine.dialect.name}; {len(searches)} requests, {len(events)} clicks over {args.days} days")

        queue_us = []
        for _ in range(args.runs):
            recorder = AnalyticsRecorder(store, RecorderConfig(queue_size=len(searches) + 1, flush_interval_s=3600,
                                                                retention_days=90))
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
            recorder = AnalyticsRecorder(store, RecorderConfig(queue_size=len(searches) + 1, flush_interval_s=3600,
                                                                retention_days=90))
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
        print(f"report over {args.days} days from the raw log (s): {spread(report_s)}  ({report.total.searches} "
              f"searches from {report.requests} requests, CTR {report.total.click_through_rate:.2f})")
        AnalyticsRecorder(store, RecorderConfig(queue_size=10, flush_interval_s=3600,
                                                retention_days=args.days)).rollup(force=True)
        page_s = []
        for _ in range(args.runs):
            started = time.perf_counter()
            rolled = load_rollup_report(store, today - timedelta(days=args.days - 1), today)
            page_s.append(time.perf_counter() - started)
        assert rolled.total == report.total, (rolled.total, report.total)
        print(f"page: report over {args.days} days from the roll-ups (s): {spread(page_s)}")


if __name__ == "__main__":
    main()

"""The analytics writer: searches and events are buffered in memory and written in batches by
one background thread, so no database write sits on the request path (a busy type-ahead box
sends a request per keystroke pause).

* The queue is bounded (ANALYTICS_QUEUE_SIZE items; one item per search or per events request).
  When it is full the new item is dropped and counted, never waited for.
* The thread flushes every ANALYTICS_FLUSH_INTERVAL_S: everything queued, in one transaction. A
  batch that fails (database down or locked) is kept and tried again at the next flush, up to
  MAX_WRITE_ATTEMPTS times, then dropped and counted. A batch the database refuses for its
  content is written again item by item, so a bad row is dropped (counted `rejected`) alone.
* Once an hour (PURGE_INTERVAL_S) the thread purges rows older than ANALYTICS_RETENTION_DAYS.
* Every ROLLUP_CHECK_S it rolls up at most one due day (analytics.rollup): today every
  ANALYTICS_ROLLUP_INTERVAL_S, then the days not final or not rolled up yet.
* At interpreter exit (also a gunicorn worker's graceful exit) the queue is flushed.

Each process has its own writer (a gunicorn worker is a process); the thread starts with the
first recorded item, in the process that records it, so a fork never inherits a dead thread.
Counts per (kind, outcome) are kept in `counts` and reported to `on_count` (Prometheus).
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Sequence

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError

from analytics.records import EventRecord, SearchRecord
from analytics.rollup import due_days, final_after, rollup_day, window
from analytics.store import AnalyticsStore
from catalog.models import utcnow

log = logging.getLogger(__name__)

PURGE_INTERVAL_S = 3600.0
ROLLUP_CHECK_S = 10.0   # how often the thread looks for a day to roll up (analytics.rollup)
MAX_WRITE_ATTEMPTS = 3
SEARCH, EVENTS = "search", "events"
QUEUED, WRITTEN, DROPPED_FULL, WRITE_FAILED = "queued", "written", "dropped_full", "write_failed"
OVER_CAP = "over_cap"   # events refused by the flood caps (analytics.budget)
REJECTED = "rejected"   # one item the database refused for its content, written alone and dropped


def is_outage(exc: BaseException) -> bool:
    """The database is unreachable, locked or gone (retry the batch later), as opposed to a row
    it refuses (isolate it): SQLAlchemy's OperationalError/InterfaceError/DisconnectionError."""
    return isinstance(exc, (OperationalError, InterfaceError, DisconnectionError))


@dataclass(frozen=True)
class RecorderConfig:
    """The writer's bounds and cadence (the module docstring): the queue's size in items
    (ANALYTICS_QUEUE_SIZE), the seconds between flushes (ANALYTICS_FLUSH_INTERVAL_S), the days a
    row is kept (ANALYTICS_RETENTION_DAYS), the seconds between roll-ups of today
    (ANALYTICS_ROLLUP_INTERVAL_S), and whether it records at all (ANALYTICS_ENABLED)."""

    queue_size: int
    flush_interval_s: float
    retention_days: int
    rollup_interval_s: float = 300.0
    enabled: bool = True


class AnalyticsRecorder:
    def __init__(self, store: AnalyticsStore, config: RecorderConfig,
                 on_count: Callable[[str, str, int], None] | None = None, clock: Callable[[], datetime] = utcnow):
        self.store = store
        self.rollup_interval = timedelta(seconds=config.rollup_interval_s)
        self._last_rollup_check: float | None = None
        self.enabled = config.enabled
        self.flush_interval_s = config.flush_interval_s
        self.retention = timedelta(days=config.retention_days)
        self.on_count = on_count
        self.clock = clock
        self.counts: Counter[tuple[str, str]] = Counter()
        # A deque, not a queue.Queue: nothing ever waits on it (the thread drains it on its own
        # clock), and Queue.put_nowait takes a lock and notifies a condition for each search
        # (issue 43 item 6). Appends and pops of a deque are atomic; the bound is checked before
        # the append, so threads racing at the very edge may pass it by one item each.
        self._queue: deque[tuple[str, tuple]] = deque()
        self._queue_size = config.queue_size if config.queue_size > 0 else float("inf")   # as Queue's maxsize
        self._retry: list[tuple[str, tuple, int]] = []   # (kind, records, attempts so far)
        self._write_lock = threading.Lock()               # one flush at a time (thread, flush(), exit)
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_pid: int | None = None
        self._last_purge: float | None = None

    # -- the request side: never blocks, never touches the database --------------------------
    def record_search(self, record: SearchRecord) -> bool:
        """Queue one search; False when analytics is off or the queue is full (dropped, counted)."""
        return self._offer(SEARCH, (record,))

    def record_events(self, records: Sequence[EventRecord]) -> bool:
        """Queue one request's events, all or none; False when off or the queue is full."""
        return self._offer(EVENTS, tuple(records))

    def refused(self, n: int) -> None:
        """Count events refused by the flood caps (analytics.budget), never queued."""
        self._count(EVENTS, OVER_CAP, n)

    def _offer(self, kind: str, records: tuple) -> bool:
        if not self.enabled:
            return False
        self._ensure_thread()
        if len(self._queue) >= self._queue_size:
            self._count(kind, DROPPED_FULL, len(records))
            return False
        self._queue.append((kind, records))
        self._count(kind, QUEUED, len(records))
        return True

    def _count(self, kind: str, outcome: str, n: int) -> None:
        if n:
            self.counts[kind, outcome] += n
            if self.on_count is not None:
                self.on_count(kind, outcome, n)

    # -- the writer side -----------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread_pid == os.getpid():
            return
        with self._start_lock:
            if self._thread is not None and self._thread_pid == os.getpid():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="analytics-writer", daemon=True)
            self._thread_pid = os.getpid()
            self._thread.start()
            atexit.register(self.close)

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
                if self._last_purge is None or time.monotonic() - self._last_purge >= PURGE_INTERVAL_S:
                    self._last_purge = time.monotonic()
                    self.purge()
                if self._last_rollup_check is None or time.monotonic() - self._last_rollup_check >= ROLLUP_CHECK_S:
                    self._last_rollup_check = time.monotonic()
                    self.rollup(max_days=1)
            except Exception:  # the writer must outlive any one failure; it is logged with its traceback
                log.exception("analytics writer: flush or purge failed")

    def flush(self) -> int:
        """Write everything queued so far (and batches waiting for a retry) in one transaction;
        returns the number of rows written. Safe to call from any thread; waits for a flush
        already running."""
        with self._write_lock:
            batch = list(self._retry)
            self._retry.clear()
            while True:
                try:
                    kind, records = self._queue.popleft()
                except IndexError:
                    break
                batch.append((kind, records, 0))
            if not batch:
                return 0
            searches = [r for kind, records, _ in batch if kind == SEARCH for r in records]
            events = [r for kind, records, _ in batch if kind == EVENTS for r in records]
            try:
                self.store.write(searches, events)
            except Exception as exc:
                if is_outage(exc) or len(batch) == 1:
                    self._keep_for_retry(batch, exc)
                    return 0
                return self._write_alone(batch)
            self._count(SEARCH, WRITTEN, len(searches))
            self._count(EVENTS, WRITTEN, len(events))
            return len(searches) + len(events)

    def _write_alone(self, batch: list[tuple[str, tuple, int]]) -> int:
        """A batch the database refused for its content (not an outage): write each item (one
        search, or one request's events) in its own transaction, so that one bad row costs only
        its own item (issue 17: a lone surrogate used to drop every search queued beside it).
        A refused item is dropped and counted as `rejected`; if the database goes away meanwhile,
        the rest is kept for a retry."""
        written = 0
        for position, (kind, records, attempts) in enumerate(batch):
            try:
                self.store.write(records if kind == SEARCH else (), records if kind == EVENTS else ())
            except Exception as exc:
                if is_outage(exc):
                    self._keep_for_retry(batch[position:], exc)
                    break
                self._count(kind, REJECTED, len(records))
                log.warning("analytics writer: dropped one %s item the database refused (%s: %s)",
                            kind, type(exc).__name__, str(exc)[:200])
                continue
            self._count(kind, WRITTEN, len(records))
            written += len(records)
        return written

    def _keep_for_retry(self, batch: list[tuple[str, tuple, int]], exc: Exception) -> None:
        for kind, records, attempts in batch:
            if attempts + 1 < MAX_WRITE_ATTEMPTS:
                self._retry.append((kind, records, attempts + 1))
            else:
                self._count(kind, WRITE_FAILED, len(records))
        log.warning("analytics writer: a batch could not be written (%s: %s); %d item(s) kept for a retry",
                    type(exc).__name__, exc, len(self._retry))

    def purge(self, now: datetime | None = None) -> tuple[int, int]:
        """Delete searches and events older than the retention; (searches, events) deleted."""
        deleted = self.store.purge((now or self.clock()) - self.retention)
        if any(deleted):
            log.info("analytics: purged %d searches and %d events older than %d days", *deleted, self.retention.days)
        return deleted

    def rollup(self, now: datetime | None = None, max_days: int | None = None, force: bool = False,
               days: Sequence | None = None) -> int:
        """Roll up the due days (analytics.rollup.due_days; with `force`, every day not final
        yet, whatever the interval; or just `days`), at most `max_days` of them; returns how many
        were rolled up. A day another process has claimed is skipped."""
        now = now or self.clock()
        today = now.date()
        interval = timedelta(0) if force or days is not None else self.rollup_interval
        if days is None:
            first = today - timedelta(days=self.retention.days)
            days = due_days(self.store.rollup_state(first, today), today, first, now, interval)
        done = 0
        for day in days:
            if max_days is not None and done >= max_days:
                break
            if not self.store.claim_day(day, now, now - interval):
                continue
            (searches_from, searches_to), (events_from, events_to) = window(day)
            rolled = rollup_day(self.store.searches(searches_from, searches_to),
                                self.store.events(events_from, events_to), day)
            self.store.write_rollup(rolled, now, final=now >= final_after(day))
            done += 1
        return done

    def pending(self) -> int:
        """Items waiting to be written (queued or kept for a retry)."""
        return len(self._queue) + len(self._retry)

    def close(self) -> None:
        """Stop the thread and write what is left (at exit; idempotent)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=10)
        try:
            self.flush()
        except Exception:
            log.exception("analytics writer: the final flush failed")

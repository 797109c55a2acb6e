"""analytics.store: the search log's batch insert (one statement per batch on SQLite and
PostgreSQL) stores exactly what the generic insert stores, and search ids sort by time."""
import dataclasses
import os
import re
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

import analytics.store
from analytics.records import SEARCH_ID, EventRecord, RandomBytes, SearchRecord, new_search_id
from analytics.store import AnalyticsStore, _event_row, _search_row

START = datetime(2026, 11, 24, 12, 0, 0, 123456, tzinfo=timezone.utc)


def records(prefix: str, n: int) -> list[SearchRecord]:
    return [SearchRecord(id=f"{prefix}-{i:06d}-search", at=START + timedelta(seconds=i, microseconds=i),
                         session_id=None if i % 3 == 0 else f"session-{i % 5:04d}", query=f"héaring 'screen' {i}",
                         rerank=bool(i % 2), result_ids=tuple(f"task.{j}" for j in range(i % 4)),
                         no_confident_match=i % 4 == 0, degraded=("embeddings_unavailable",) if i % 7 == 0 else (),
                         person=f"{i % 256:02x}" if i % 2 else None)
            for i in range(n)]


def stored_rows(engine, prefix: str) -> list[tuple]:
    """The search log's rows as the database holds them (text, numbers), minus the id prefix."""
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT id, at, session_id, query, rerank, result_ids, no_confident_match, "
                                       "degraded, person FROM search_log WHERE id LIKE :p ORDER BY id"), {"p": f"{prefix}-%"})
        return [(row[0].split("-", 1)[1], *row[1:5], str(row[5]).replace(" ", ""), row[6],
                 str(row[7]).replace(" ", ""), row[8]) for row in rows]


def test_the_batch_insert_stores_what_the_generic_insert_stores(engine, monkeypatch):
    store = AnalyticsStore(engine)
    assert store._batch_sql is not None   # both databases of the suite take the one-statement path
    monkeypatch.setattr(analytics.store, "BATCH_ROWS", 7)   # several statements in one transaction
    store.write(records("batch", 30), [])
    generic = AnalyticsStore(engine)
    generic._batch_sql = None
    generic.write(records("plain", 30), [])
    assert stored_rows(engine, "batch") == stored_rows(engine, "plain")
    back = store.searches(START, START + timedelta(hours=1))
    assert sorted((r for r in back if r.id.startswith("batch")), key=lambda r: r.id) == records("batch", 30)


def test_a_failed_batch_writes_nothing(engine):
    store = AnalyticsStore(engine)
    store.write(records("first", 3), [])
    with pytest.raises(Exception):   # a duplicate id: the whole transaction is refused
        store.write([*records("second", 3), records("first", 1)[0]], [])
    assert len(stored_rows(engine, "second")) == 0 and len(stored_rows(engine, "first")) == 3


def test_rows_carry_every_field_of_their_record():
    search = records("x", 2)[1]
    event = EventRecord(at=START, search_id="s" * 22, type="click", task_id="task.1", position=1)
    assert set(_search_row(search)) == {f.name for f in dataclasses.fields(SearchRecord)}
    assert set(_event_row(event)) == {f.name for f in dataclasses.fields(EventRecord)}


def test_search_ids_sort_by_time_and_stay_unguessable():
    moments = [0, 1, 999, 1_000, 60_000, 10 ** 12, 2 ** 47]   # milliseconds
    ids = [new_search_id(ms * 1_000_000) for ms in moments]
    assert ids == sorted(ids) and all(SEARCH_ID.fullmatch(i) and len(i) == 22 for i in ids)
    same_ms = {new_search_id(5 * 10 ** 15) for _ in range(1000)}
    assert len(same_ms) == 1000                                   # 80 random bits per millisecond
    assert len({i[:8] for i in same_ms}) == 1                     # the first 8 characters are the time
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in same_ms)


def test_search_id_random_bytes_go_to_one_caller_and_not_across_a_fork():
    """RandomBytes hands out slices of os.urandom blocks: never the same bytes to two threads,
    and a forked child (a gunicorn worker) fetches its own instead of repeating its parent's."""
    source = RandomBytes()
    taken: list[bytes] = []

    def take_many():
        taken.extend(source.take(10) for _ in range(2000))

    threads = [threading.Thread(target=take_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 8000 and len(set(taken)) == 8000 and {len(t) for t in taken} == {10}

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its next bytes, to the parent
        os.write(write, source.take(10))
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 10)
    os.close(read)
    assert len(child) == 10 and child != source.take(10)   # without the reset they would be equal

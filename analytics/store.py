"""The only code that reads or writes the analytics tables (search_log, search_events).

The search log takes a row per answered search, type-ahead keystrokes included, from a writer
thread inside each web worker. A plain executemany runs one statement per row, and each one
releases and re-takes the interpreter lock (the GIL) around the database call: with request
threads busy, every row waited for its turn, and the writer cost the worker more time than the
searches it logged. So on SQLite and PostgreSQL a batch of searches is ONE statement that
expands a JSON array of rows on the database side (`json_each`, `json_array_elements`): one
parameter, one round trip, one release of the lock (docs/design/performance.md). The values
are bound exactly as SQLAlchemy binds them (its own bind processors), so the rows are the ones
an ORM insert would store; other databases take the plain executemany.
"""
from __future__ import annotations

from datetime import datetime
from typing import Sequence

import orjson
from sqlalchemy import Engine, delete, insert, select, text

from analytics.formulas import as_utc
from analytics.models import SearchEvent, SearchLogEntry
from analytics.records import EventRecord, SearchRecord


SEARCH_COLUMNS = ("id", "at", "session_id", "query", "rerank", "result_ids", "no_confident_match", "degraded")
_INTO = f"INSERT INTO search_log ({', '.join(SEARCH_COLUMNS)}) "
#: One INSERT of a whole batch of searches, given as a JSON array of arrays (SEARCH_COLUMNS order).
BATCH_INSERT = {
    "sqlite": _INTO + "SELECT " + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(SEARCH_COLUMNS))) +
              " FROM json_each(:rows)",   # json_extract: an array element comes back as its JSON text
    "postgresql": _INTO + "SELECT r ->> 0, (r ->> 1)::timestamptz, r ->> 2, r ->> 3, (r ->> 4)::boolean, r -> 5, "
                  "(r ->> 6)::boolean, r -> 7 FROM json_array_elements(CAST(:rows AS json)) AS r",
}
BATCH_ROWS = 5000   # rows per statement (bounds the one parameter's size)


class AnalyticsStore:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._batch_sql = BATCH_INSERT.get(engine.dialect.name)
        table = SearchLogEntry.__table__

        def bound(name: str):
            """SQLAlchemy's own conversion of a column value into what the driver is given."""
            return table.c[name].type.dialect_impl(engine.dialect).bind_processor(engine.dialect) or (lambda v: v)

        # PostgreSQL casts text back (ISO 8601 with the offset); SQLite stores its own datetime text
        self._at = datetime.isoformat if engine.dialect.name == "postgresql" else bound("at")
        self._rerank, self._no_match = bound("rerank"), bound("no_confident_match")

    def write(self, searches: Sequence[SearchRecord], events: Sequence[EventRecord]) -> None:
        """Insert a batch of searches and events in one transaction (all or nothing)."""
        with self.engine.begin() as connection:
            if searches and self._batch_sql is not None:
                for start in range(0, len(searches), BATCH_ROWS):
                    connection.execute(text(self._batch_sql),
                                       {"rows": self._search_batch_json(searches[start:start + BATCH_ROWS])})
            elif searches:
                connection.execute(insert(SearchLogEntry), [_search_row(s) for s in searches])
            if events:
                connection.execute(insert(SearchEvent), [_event_row(e) for e in events])

    def _search_batch_json(self, searches: Sequence[SearchRecord]) -> str:
        """The JSON array of the rows of BATCH_INSERT, each value as SQLAlchemy would bind it
        (SQLite: datetimes as its own text format, booleans as 0/1; PostgreSQL: ISO 8601 text
        and true/false, cast back by the statement)."""
        return orjson.dumps([[s.id, self._at(s.at), s.session_id, s.query, self._rerank(s.rerank), s.result_ids,
                              self._no_match(s.no_confident_match), s.degraded] for s in searches]).decode()

    def searches(self, start: datetime, end: datetime) -> list[SearchRecord]:
        """Searches logged in [start, end), oldest first."""
        query = (select(SearchLogEntry).where(SearchLogEntry.at >= start, SearchLogEntry.at < end)
                 .order_by(SearchLogEntry.at, SearchLogEntry.id))
        with self.engine.connect() as connection:
            return [SearchRecord(id=r.id, at=as_utc(r.at), session_id=r.session_id, query=r.query,
                                 rerank=r.rerank, result_ids=tuple(r.result_ids),
                                 no_confident_match=r.no_confident_match, degraded=tuple(r.degraded))
                    for r in connection.execute(query)]

    def events(self, start: datetime, end: datetime) -> list[EventRecord]:
        """Events received in [start, end), oldest first."""
        query = (select(SearchEvent).where(SearchEvent.at >= start, SearchEvent.at < end)
                 .order_by(SearchEvent.at, SearchEvent.id))
        with self.engine.connect() as connection:
            return [EventRecord(at=as_utc(r.at), search_id=r.search_id, type=r.type, session_id=r.session_id,
                                task_id=r.task_id, position=r.position, dwell_ms=r.dwell_ms, query=r.query,
                                task_ids=tuple(r.task_ids) if r.task_ids is not None else None, network=r.network)
                    for r in connection.execute(query)]

    def purge(self, before: datetime) -> tuple[int, int]:
        """Delete searches and events older than `before`; (searches, events) deleted."""
        with self.engine.begin() as connection:
            searches = connection.execute(delete(SearchLogEntry).where(SearchLogEntry.at < before)).rowcount
            events = connection.execute(delete(SearchEvent).where(SearchEvent.at < before)).rowcount
        return searches, events


def _search_row(record: SearchRecord) -> dict:
    """The row of one search (built field by field: dataclasses.asdict deep-copies every value,
    which cost the writer thread more than the insert itself at type-ahead rates)."""
    return {"id": record.id, "at": record.at, "session_id": record.session_id, "query": record.query,
            "rerank": record.rerank, "result_ids": list(record.result_ids),
            "no_confident_match": record.no_confident_match, "degraded": list(record.degraded)}


def _event_row(record: EventRecord) -> dict:
    return {"at": record.at, "search_id": record.search_id, "type": record.type, "session_id": record.session_id,
            "task_id": record.task_id, "position": record.position, "dwell_ms": record.dwell_ms,
            "query": record.query, "task_ids": list(record.task_ids) if record.task_ids is not None else None,
            "network": record.network}

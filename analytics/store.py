"""The only code that reads or writes the analytics tables (search_log, search_events)."""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Sequence

from sqlalchemy import Engine, delete, insert, select

from analytics.formulas import as_utc
from analytics.models import SearchEvent, SearchLogEntry
from analytics.records import EventRecord, SearchRecord


class AnalyticsStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    def write(self, searches: Sequence[SearchRecord], events: Sequence[EventRecord]) -> None:
        """Insert a batch of searches and events in one transaction (all or nothing)."""
        with self.engine.begin() as connection:
            if searches:
                connection.execute(insert(SearchLogEntry), [_search_row(s) for s in searches])
            if events:
                connection.execute(insert(SearchEvent), [_event_row(e) for e in events])

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
                                task_ids=tuple(r.task_ids) if r.task_ids is not None else None)
                    for r in connection.execute(query)]

    def purge(self, before: datetime) -> tuple[int, int]:
        """Delete searches and events older than `before`; (searches, events) deleted."""
        with self.engine.begin() as connection:
            searches = connection.execute(delete(SearchLogEntry).where(SearchLogEntry.at < before)).rowcount
            events = connection.execute(delete(SearchEvent).where(SearchEvent.at < before)).rowcount
        return searches, events


def _search_row(record: SearchRecord) -> dict:
    row = asdict(record)
    row.update(result_ids=list(record.result_ids), degraded=list(record.degraded))
    return row


def _event_row(record: EventRecord) -> dict:
    row = asdict(record)
    row["task_ids"] = list(record.task_ids) if record.task_ids is not None else None
    return row

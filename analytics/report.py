"""The analytics report of a span of days: what the admin page and `analytics report` show.

`summarise` is pure (records in, Report out); `load_report` reads the records from the store.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from urllib.parse import urlencode

from analytics import formulas
from analytics.formulas import Measures, QueryReport
from analytics.records import EventRecord, SearchRecord
from analytics.store import AnalyticsStore

#: Events are read this long past the span's end: a click can come a while after its search.
EVENT_GRACE = timedelta(days=1)


@dataclass(frozen=True)
class Report:
    first: date
    last: date
    requests: int                         # /api/search requests logged (keystrokes included)
    total: Measures
    days: list[tuple[date, Measures]]
    no_result_queries: list[QueryReport]
    low_ctr_queries: list[QueryReport]
    unmatched_events: int                 # events received in the span whose search id is not in its log

    def as_dict(self) -> dict:
        def query(report: QueryReport) -> dict:
            return {"query": report.query, "suggested_gold": report.suggested_gold, **report.measures.as_dict()}
        return {"first": self.first.isoformat(), "last": self.last.isoformat(), "requests": self.requests,
                "total": self.total.as_dict(), "unmatched_events": self.unmatched_events,
                "days": [{"day": day.isoformat(), **m.as_dict()} for day, m in self.days],
                "no_result_queries": [query(r) for r in self.no_result_queries],
                "low_ctr_queries": [query(r) for r in self.low_ctr_queries]}


def summarise(searches: list[SearchRecord], events: list[EventRecord], first: date, last: date,
              limit: int = 20) -> Report:
    """The measures of the searches in `searches` over the days `first`..`last`."""
    found = formulas.intents(searches, events)
    queries = formulas.by_query(found)
    return Report(first=first, last=last, requests=len(searches), total=formulas.measure(found),
                  days=formulas.by_day(found, first, last),
                  no_result_queries=formulas.top_no_result_queries(queries, limit),
                  low_ctr_queries=formulas.low_ctr_queries(queries, limit),
                  unmatched_events=formulas.unmatched_events(
                      searches, [e for e in events if formulas.as_utc(e.at) < day_start(last + timedelta(days=1))]))


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.utc)


def load_report(store: AnalyticsStore, first: date, last: date, limit: int = 20) -> Report:
    """The report of the UTC days `first`..`last` (inclusive) from the database."""
    start, end = day_start(first), day_start(last + timedelta(days=1))
    return summarise(store.searches(start, end), store.events(start, end + EVENT_GRACE), first, last, limit)


def new_case_url(editor_path: str, query: str, gold: str | None) -> str:
    """The test-case editor pre-filled with `query` and, when known, `gold` as the suggested task:
    `<editor_path>?query=...&gold=...`."""
    params = {"query": query, **({"gold": gold} if gold else {})}
    return f"{editor_path}?{urlencode(params)}"

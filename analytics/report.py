"""The analytics report of a span of days: what the admin page and `analytics report` show.

Two ways to the same Report: `load_rollup_report` reads the daily roll-ups (analytics.rollup;
what the page does: days, not rows), `load_report` computes it from the raw log (`summarise`,
pure: records in, Report out; the reference the roll-ups are tested against, and the CLI's
`--exact`). Session-less requests are requests, not searches (analytics.rollup).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from analytics import formulas
from analytics.formulas import Measures, QueryReport
from analytics.records import EventRecord, SearchRecord
from analytics.rollup import EVENT_GRACE, day_start, person_searches, task_counts
from analytics.store import MEASURE_COLUMNS as _MEASURES, AnalyticsStore

__all__ = ["EVENT_GRACE", "Report", "day_start", "load_report", "load_rollup_report", "summarise"]


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
    sessionless_requests: int = 0         # requests without a session id: not searches
    top_queries: list[QueryReport] = field(default_factory=list)     # most searched
    top_results: list[tuple[str, int]] = field(default_factory=list)  # (task id, clicks), most clicked
    as_of: datetime | None = None         # when the newest roll-up read was made (None: from the raw log)

    def as_dict(self) -> dict:
        def query(report: QueryReport) -> dict:
            return {"query": report.query, "suggested_gold": report.suggested_gold, **report.measures.as_dict()}
        return {"first": self.first.isoformat(), "last": self.last.isoformat(), "requests": self.requests,
                "sessionless_requests": self.sessionless_requests,
                "total": self.total.as_dict(), "unmatched_events": self.unmatched_events,
                "days": [{"day": day.isoformat(), **m.as_dict()} for day, m in self.days],
                "top_queries": [query(r) for r in self.top_queries],
                "top_results": [{"task_id": task, "clicks": clicks} for task, clicks in self.top_results],
                "no_result_queries": [query(r) for r in self.no_result_queries],
                "low_ctr_queries": [query(r) for r in self.low_ctr_queries],
                "as_of": self.as_of.isoformat() if self.as_of else None}


def top_results(found, limit: int) -> list[tuple[str, int]]:
    """(task id, clicks) of the most clicked tasks (ties: task id)."""
    clicks: dict[str, int] = {}
    for (_query, task), (n, _followups) in task_counts(found).items():
        clicks[task] = clicks.get(task, 0) + n
    return sorted(((t, n) for t, n in clicks.items() if n), key=lambda item: (-item[1], item[0]))[:limit]


def summarise(searches: list[SearchRecord], events: list[EventRecord], first: date, last: date,
              limit: int = 20) -> Report:
    """The measures of the searches in `searches` over the days `first`..`last`."""
    found = formulas.intents(person_searches(searches), events)
    queries = formulas.by_query(found)
    return Report(first=first, last=last, requests=len(searches), total=formulas.measure(found),
                  days=formulas.by_day(found, first, last),
                  no_result_queries=formulas.top_no_result_queries(queries, limit),
                  low_ctr_queries=formulas.low_ctr_queries(queries, limit),
                  unmatched_events=formulas.unmatched_events(
                      searches, [e for e in events if formulas.as_utc(e.at) < day_start(last + timedelta(days=1))]),
                  sessionless_requests=sum(1 for s in searches if not s.session_id),
                  top_queries=queries[:limit], top_results=top_results(found, limit))


def load_report(store: AnalyticsStore, first: date, last: date, limit: int = 20) -> Report:
    """The report of the UTC days `first`..`last` (inclusive) from the raw log (every row)."""
    start, end = day_start(first), day_start(last + timedelta(days=1))
    return summarise(store.searches(start, end), store.events(start, end + EVENT_GRACE), first, last, limit)


def load_rollup_report(store: AnalyticsStore, first: date, last: date, limit: int = 20) -> Report:
    """The report of `first`..`last` from the daily roll-ups: one row per day, and grouped sums
    over the per-day query and task rows; a day not rolled up yet counts as empty."""
    stored = {row.day: row for row in store.rollup_days(first, last)}
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    per_day = [(day, Measures(*(getattr(stored[day], name) for name in _MEASURES)) if day in stored else Measures())
               for day in days]
    total = Measures(*(sum(getattr(m, name) for _day, m in per_day) for name in _MEASURES))
    # the same orderings as the raw report (analytics.formulas), over the summed per-query rows
    queries = sorted((QueryReport(q, m, None) for q, m in store.rollup_queries(first, last)),
                     key=lambda r: (-r.measures.searches, r.query))
    lists = {"top": queries[:limit], "no_result": formulas.top_no_result_queries(queries, limit),
             "low_ctr": formulas.low_ctr_queries(queries, limit)}
    gold = store.rollup_suggested_gold(first, last, [r.query for found in lists.values() for r in found])
    lists = {name: [replace(r, suggested_gold=gold.get(r.query)) for r in found] for name, found in lists.items()}
    return Report(first=first, last=last, requests=sum(r.requests for r in stored.values()), total=total,
                  days=per_day, no_result_queries=lists["no_result"], low_ctr_queries=lists["low_ctr"],
                  unmatched_events=sum(r.unmatched_events for r in stored.values()),
                  sessionless_requests=sum(r.sessionless_requests for r in stored.values()),
                  top_queries=lists["top"], top_results=store.rollup_top_results(first, last, limit),
                  as_of=max((formulas.as_utc(r.rolled_at) for r in stored.values()), default=None))


def new_case_url(editor_path: str, query: str, gold: str | None) -> str:
    """The test-case editor pre-filled with `query` and, when known, `gold` as the suggested task:
    `<editor_path>?query=...&gold=...`."""
    params = {"query": query, **({"gold": gold} if gold else {})}
    return f"{editor_path}?{urlencode(params)}"

"""Daily roll-ups of the search log: what the analytics page reads, so a page view reads at most
a few hundred day rows and a grouped scan of per-day query rows, never the raw log (issue 17
item 6: at 10 million logged searches the raw report read every row; ops/bench_analytics.py).

A day's roll-up (`rollup_day`, pure) is the measures of analytics.formulas over the searches
that STARTED that UTC day, computed from the raw rows around it (`window`): the searches from
SEARCH_LOOKBACK before the day (a burst of typing that crosses midnight) to ROLLUP_MARGIN after
it (the next search of a session decides whether the last one of the day was reformulated), and
the events received from the day's start to EVENT_GRACE after its end (a click may come a while
after its search). A day is rolled up again, replacing its rows, until
it is `final`: rolled up after its window closed, when no late event can change it any more.

Who rolls up: every process's analytics writer thread (analytics.recorder), after a flush, at
most one day per pass: today every ANALYTICS_ROLLUP_INTERVAL_S, then yesterday until it is
final, then any day not rolled up yet (after an upgrade, newest first). A day is claimed in the
database first (`AnalyticsStore.claim_day`), so several workers do not roll up the same day at
once. `python app.py analytics rollup` does every due day at once.

Session-less requests (an API client polling /api/search without a `session`) are counted as
requests, not as searches (issue 19 item 8: 101 polling requests used to read as 101 searches
at 1% CTR); a person's search always comes with the widget's session id.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import Sequence

from analytics import formulas
from analytics.formulas import Intent, Measures
from analytics.records import EventRecord, SearchRecord

#: Events are read this long past a day's end: a click can come a while after its search.
EVENT_GRACE = timedelta(days=1)
#: Searches are read from this long before a day's start: a burst of typing that crosses
#: midnight, and the searches that a click received just after midnight is about.
SEARCH_LOOKBACK = timedelta(hours=1)
#: Searches are read this long past a day's end: a reformulation follows within
#: REFORMULATION_WINDOW_S of the previous search's last request, Back re-runs a search (whose
#: clicks are then that search's) within REPEAT_WINDOW_S, and whether the day's last text was
#: typed on is known TYPING_ON_GAP_S later.
ROLLUP_MARGIN = timedelta(seconds=max(formulas.REFORMULATION_WINDOW_S, formulas.REPEAT_WINDOW_S)
                          + 2 * formulas.TYPING_ON_GAP_S)


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.utc)


def window(day: date) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """((searches from, to), (events from, to)): the raw rows a roll-up of `day` reads."""
    start, end = day_start(day), day_start(day + timedelta(days=1))
    return (start - SEARCH_LOOKBACK, end + ROLLUP_MARGIN), (start, end + EVENT_GRACE)


def final_after(day: date) -> datetime:
    """A roll-up of `day` computed at or after this moment is final (its window has closed)."""
    return window(day)[1][1] + ROLLUP_MARGIN


@dataclass(frozen=True)
class DayRollup:
    day: date
    requests: int                       # /api/search requests logged that day (keystrokes included)
    sessionless_requests: int           # of which without a session id (not searches)
    unmatched_events: int               # events received that day whose search is not in the log
    total: Measures
    queries: dict[str, Measures] = field(default_factory=dict)
    #: (query, task id) -> (clicks on the task from the query's searches, reformulation chains
    #: from the query that ended on the task: its suggested-gold votes)
    tasks: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)


def person_searches(searches: Sequence[SearchRecord]) -> list[SearchRecord]:
    """The requests that can be a person's search: those with a session id."""
    return [s for s in searches if s.session_id]


def task_counts(found: Sequence[Intent]) -> dict[tuple[str, str], tuple[int, int]]:
    """(query, task) -> (clicks, followups) over `found` (see DayRollup.tasks)."""
    clicks: Counter[tuple[str, str]] = Counter()
    followups: Counter[tuple[str, str]] = Counter()
    for intent in found:
        for click in intent.clicks:
            clicks[intent.query, click.task_id] += 1
        if intent.followup_task:
            followups[intent.query, intent.followup_task] += 1
    return {key: (clicks[key], followups[key]) for key in clicks.keys() | followups.keys()}


def rollup_day(searches: Sequence[SearchRecord], events: Sequence[EventRecord], day: date) -> DayRollup:
    """The roll-up of `day` from the raw rows of its `window` (pure)."""
    start, end = day_start(day), day_start(day + timedelta(days=1))
    found = [i for i in formulas.intents(person_searches(searches), events) if i.day == day]
    per_query: dict[str, list[Intent]] = defaultdict(list)
    for intent in found:
        per_query[intent.query].append(intent)
    in_day = [s for s in searches if start <= formulas.as_utc(s.at) < end]
    known = {s.id for s in searches}
    unmatched = sum(1 for e in events if start <= formulas.as_utc(e.at) < end and e.search_id not in known)
    return DayRollup(day=day, requests=len(in_day), sessionless_requests=sum(1 for s in in_day if not s.session_id),
                     unmatched_events=unmatched, total=formulas.measure(found),
                     queries={query: formulas.measure(group) for query, group in per_query.items()},
                     tasks=task_counts(found))


def due_days(state: dict[date, tuple[datetime, bool]], today: date, first: date, now: datetime,
             interval: timedelta) -> list[date]:
    """The days of first..today to roll up now, most urgent first: today and yesterday when their
    roll-up is older than `interval` and not final, then the days never rolled up, newest first.
    `state`: day -> (rolled_at, final) of the stored roll-ups."""
    due = []
    for offset in range((today - first).days + 1):
        day = today - timedelta(days=offset)
        stored = state.get(day)
        if stored is None:
            due.append(day)
        elif not stored[1] and formulas.as_utc(stored[0]) <= now - interval:
            due.append(day)
    return sorted(due, key=lambda d: (state.get(d) is None, -d.toordinal()))

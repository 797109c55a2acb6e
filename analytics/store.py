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

from datetime import date, datetime
from typing import Sequence

import orjson
from sqlalchemy import Engine, Text, cast, delete, desc, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from analytics.completion_models import CompletionBlock, CompletionBlockedWord

from analytics.formulas import Measures, as_utc
from analytics.models import RollupDay, RollupQueryDay, RollupTaskDay, SearchEvent, SearchLogEntry
from analytics.records import EventRecord, SearchRecord
from analytics.rollup import DayRollup
from search.completions import Click, Exclusions


SEARCH_COLUMNS = ("id", "at", "session_id", "query", "rerank", "result_ids", "no_confident_match", "degraded",
                  "person")
_INTO = f"INSERT INTO search_log ({', '.join(SEARCH_COLUMNS)}) "
#: One INSERT of a whole batch of searches, given as a JSON array of arrays (SEARCH_COLUMNS order).
BATCH_INSERT = {
    "sqlite": _INTO + "SELECT " + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(len(SEARCH_COLUMNS))) +
              " FROM json_each(:rows)",   # json_extract: an array element comes back as its JSON text
    "postgresql": _INTO + "SELECT r ->> 0, (r ->> 1)::timestamptz, r ->> 2, r ->> 3, (r ->> 4)::boolean, r -> 5, "
                  "(r ->> 6)::boolean, r -> 7, r ->> 8 FROM json_array_elements(CAST(:rows AS json)) AS r",
}
BATCH_ROWS = 5000   # rows per statement (bounds the one parameter's size)
#: The columns of formulas.Measures, as stored in the roll-up tables.
MEASURE_COLUMNS = ("searches", "no_result", "clicked", "clicks", "click_position_sum", "abandoned", "reformulated")


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
                              self._no_match(s.no_confident_match), s.degraded, s.person] for s in searches]).decode()

    def searches(self, start: datetime, end: datetime) -> list[SearchRecord]:
        """Searches logged in [start, end), oldest first.

        Read as plain text and decoded here (orjson for the JSON lists, datetime.fromisoformat for
        SQLite's datetime text): SQLAlchemy's own result processors (stdlib json, a regex per
        datetime) cost 55 µs a row, most of a day's roll-up (analytics.rollup) at 100,000 rows."""
        t = SearchLogEntry
        sqlite = self.engine.dialect.name == "sqlite"
        at = cast(t.at, Text) if sqlite else t.at
        query = (select(t.id, at.label("at"), t.session_id, t.query, t.rerank, cast(t.result_ids, Text).label("result_ids"),
                        t.no_confident_match, cast(t.degraded, Text).label("degraded"), t.person)
                 .where(t.at >= start, t.at < end).order_by(t.at, t.id))
        loads, parse = orjson.loads, datetime.fromisoformat
        with self.engine.connect() as connection:
            return [SearchRecord(id=r[0], at=as_utc(parse(r[1]) if sqlite else r[1]), session_id=r[2], query=r[3],
                                 rerank=bool(r[4]), result_ids=tuple(loads(r[5])), no_confident_match=bool(r[6]),
                                 degraded=tuple(loads(r[7])), person=r[8])
                    for r in connection.execute(query)]

    def events(self, start: datetime, end: datetime, types: Sequence[str] | None = None) -> list[EventRecord]:
        """Events received in [start, end), oldest first; only those of `types` when given."""
        query = select(SearchEvent).where(SearchEvent.at >= start, SearchEvent.at < end)
        if types is not None:
            query = query.where(SearchEvent.type.in_(list(types)))
        query = query.order_by(SearchEvent.at, SearchEvent.id)
        with self.engine.connect() as connection:
            return [EventRecord(at=as_utc(r.at), search_id=r.search_id, type=r.type, session_id=r.session_id,
                                task_id=r.task_id, position=r.position, dwell_ms=r.dwell_ms, query=r.query,
                                task_ids=tuple(r.task_ids) if r.task_ids is not None else None, network=r.network)
                    for r in connection.execute(query)]

    # -- popular searches (search.completions) ---------------------------------------------------
    def clicked_searches(self) -> list[Click]:
        """Each (query, verified person or None, clicked task, the task ids the search showed)
        of the click events sent by the session that made their search (analytics.formulas.
        bound_to_search), on searches that were answered (not "no confident match"), once, with
        the time of its first such click. The person is the search's (verified when it was made,
        never claimed by the click). Whether the task was one the search showed is left to the
        caller (search.completions.crowd_queries)."""
        s, e = SearchLogEntry, SearchEvent
        shown = cast(s.result_ids, Text)
        query = (select(s.query, s.person, e.task_id, shown, func.min(e.at))
                 .join(e, (e.search_id == s.id) & (e.session_id == s.session_id))
                 .where(e.type == "click", e.task_id.is_not(None), s.session_id.is_not(None),
                        s.no_confident_match.is_(False))
                 .group_by(s.query, s.person, e.task_id, shown))
        loads = orjson.loads
        with self.engine.connect() as connection:
            return [Click(r[0], r[1], r[2], tuple(loads(r[3])), as_utc(r[4])) for r in connection.execute(query)]

    # -- the completions' exclusion list (admin.completions) -----------------------------------
    def completion_exclusions(self) -> Exclusions:
        """The blocked suggestions (keys) and words."""
        with self.engine.connect() as connection:
            return Exclusions(connection.scalars(select(CompletionBlock.key)),
                              connection.scalars(select(CompletionBlockedWord.word)))

    def completion_blocks(self) -> list[CompletionBlock]:
        """The blocked suggestions, newest first."""
        with Session(self.engine) as session:
            return list(session.scalars(select(CompletionBlock)
                                        .order_by(CompletionBlock.created_at.desc(), CompletionBlock.key)))

    def completion_blocked_words(self) -> list[CompletionBlockedWord]:
        """The blocked words, alphabetically."""
        with Session(self.engine) as session:
            return list(session.scalars(select(CompletionBlockedWord).order_by(CompletionBlockedWord.word)))

    def unanswered_queries(self, queries: Sequence[str], chunk: int = 500) -> frozenset[str]:
        """Those of `queries` whose latest logged search answered "no confident match" (a tie in
        time counts as unanswered)."""
        latest: dict[str, dict[bool, datetime]] = {}
        s = SearchLogEntry
        with self.engine.connect() as connection:
            for start in range(0, len(queries), chunk):
                part = sorted(set(queries[start:start + chunk]))
                rows = connection.execute(select(s.query, s.no_confident_match, func.max(s.at))
                                          .where(s.query.in_(part)).group_by(s.query, s.no_confident_match))
                for query, unanswered, at in rows:
                    latest.setdefault(query, {})[bool(unanswered)] = as_utc(at)
        return frozenset(q for q, at in latest.items()
                         if True in at and (False not in at or at[True] >= at[False]))

    def purge(self, before: datetime) -> tuple[int, int]:
        """Delete searches and events older than `before`, and the roll-ups of the days before
        its day; (searches, events) deleted."""
        with self.engine.begin() as connection:
            searches = connection.execute(delete(SearchLogEntry).where(SearchLogEntry.at < before)).rowcount
            events = connection.execute(delete(SearchEvent).where(SearchEvent.at < before)).rowcount
            for model in (RollupTaskDay, RollupQueryDay, RollupDay):
                connection.execute(delete(model).where(model.day < before.date()))
        return searches, events

    # -- daily roll-ups (analytics.rollup) ------------------------------------------------------
    def rollup_state(self, first: date, last: date) -> dict[date, tuple[datetime, bool]]:
        """day -> (rolled_at, final) of the stored roll-ups of first..last."""
        query = select(RollupDay.day, RollupDay.rolled_at, RollupDay.final).where(RollupDay.day.between(first, last))
        with self.engine.connect() as connection:
            return {r.day: (as_utc(r.rolled_at), r.final) for r in connection.execute(query)}

    def claim_day(self, day: date, now: datetime, stale_before: datetime) -> bool:
        """Take the roll-up of `day` for this process: True when it had no roll-up, or a
        non-final one rolled before `stale_before` (its rolled_at is moved to `now`, so other
        processes see it as fresh); False when another process has it or it is final."""
        with self.engine.begin() as connection:
            row = connection.execute(select(RollupDay.rolled_at, RollupDay.final).where(RollupDay.day == day)).first()
            if row is None:
                try:
                    with connection.begin_nested():
                        connection.execute(insert(RollupDay).values(day=day, rolled_at=now, final=False))
                    return True
                except IntegrityError:
                    return False
            if row.final or as_utc(row.rolled_at) > stale_before:
                return False
            return connection.execute(update(RollupDay).where(RollupDay.day == day, RollupDay.rolled_at == row.rolled_at)
                                      .values(rolled_at=now)).rowcount == 1

    def write_rollup(self, rollup: DayRollup, rolled_at: datetime, final: bool) -> None:
        """Replace the roll-up rows of one day (one transaction)."""
        day = rollup.day
        with self.engine.begin() as connection:
            for model in (RollupTaskDay, RollupQueryDay, RollupDay):
                connection.execute(delete(model).where(model.day == day))
            connection.execute(insert(RollupDay).values(
                day=day, requests=rollup.requests, sessionless_requests=rollup.sessionless_requests,
                unmatched_events=rollup.unmatched_events, rolled_at=rolled_at, final=final,
                **_measure_values(rollup.total)))
            if rollup.queries:
                connection.execute(insert(RollupQueryDay), [{"day": day, "query": query, **_measure_values(m)}
                                                            for query, m in rollup.queries.items()])
            if rollup.tasks:
                connection.execute(insert(RollupTaskDay), [
                    {"day": day, "query": query, "task_id": task_id, "clicks": clicks, "followups": followups}
                    for (query, task_id), (clicks, followups) in rollup.tasks.items()])

    def rollup_days(self, first: date, last: date) -> list[RollupDay]:
        """The stored day rows of first..last (days never rolled up are absent)."""
        with self.engine.connect() as connection:
            return list(connection.execute(select(RollupDay).where(RollupDay.day.between(first, last))
                                           .order_by(RollupDay.day)))

    def rollup_queries(self, first: date, last: date) -> list[tuple[str, Measures]]:
        """Every query's measures summed over first..last: one grouped scan of the per-day query
        rows (the page then ranks them with analytics.formulas' own orderings)."""
        m = RollupQueryDay
        query = (select(m.query, *(func.sum(getattr(m, name)).label(name) for name in MEASURE_COLUMNS))
                 .where(m.day.between(first, last)).group_by(m.query))
        with self.engine.connect() as connection:
            return [(r[0], Measures(*(int(v) for v in r[1:]))) for r in connection.execute(query)]

    def rollup_suggested_gold(self, first: date, last: date, queries: Sequence[str]) -> dict[str, str]:
        """query -> the task that most often ended a reformulation chain from it over first..last
        (ties: the smaller task id; analytics.formulas.suggested_gold)."""
        if not queries:
            return {}
        t = RollupTaskDay
        query = (select(t.query, t.task_id, func.sum(t.followups).label("n"))
                 .where(t.day.between(first, last), t.query.in_(sorted(set(queries))), t.followups > 0)
                 .group_by(t.query, t.task_id))
        best: dict[str, tuple[int, str]] = {}
        with self.engine.connect() as connection:
            for r in connection.execute(query):
                key = (-int(r.n), r.task_id)
                if r.query not in best or key < best[r.query]:
                    best[r.query] = key
        return {q: task for q, (_n, task) in best.items()}

    def rollup_top_results(self, first: date, last: date, limit: int) -> list[tuple[str, int]]:
        """(task id, clicks) of the most clicked tasks over first..last (ties: task id)."""
        t = RollupTaskDay
        total = func.sum(t.clicks)
        query = (select(t.task_id, total.label("clicks")).where(t.day.between(first, last)).group_by(t.task_id)
                 .having(total > 0).order_by(desc(total), self._bytewise(t.task_id)).limit(limit))
        with self.engine.connect() as connection:
            return [(r.task_id, int(r.clicks)) for r in connection.execute(query)]

    def _bytewise(self, column):
        """`column` ordered by code point, as Python orders strings (PostgreSQL's default
        collation is the locale's)."""
        return column.collate("C") if self.engine.dialect.name == "postgresql" else column


def _measure_values(measures: Measures) -> dict:
    return {name: getattr(measures, name) for name in MEASURE_COLUMNS}


def _search_row(record: SearchRecord) -> dict:
    """The row of one search (built field by field: dataclasses.asdict deep-copies every value,
    which cost the writer thread more than the insert itself at type-ahead rates)."""
    return {"id": record.id, "at": record.at, "session_id": record.session_id, "query": record.query,
            "rerank": record.rerank, "result_ids": list(record.result_ids),
            "no_confident_match": record.no_confident_match, "degraded": list(record.degraded),
            "person": record.person}


def _event_row(record: EventRecord) -> dict:
    return {"at": record.at, "search_id": record.search_id, "type": record.type, "session_id": record.session_id,
            "task_id": record.task_id, "position": record.position, "dwell_ms": record.dwell_ms,
            "query": record.query, "task_ids": list(record.task_ids) if record.task_ids is not None else None,
            "network": record.network}


# -- changes to the completions' exclusion list, in the caller's session (its audit entry beside) --
def add_completion_block(session: Session, key: str, text_: str, actor: str) -> bool:
    """Block the suggestion `key` (search.completions.completion_key); False: blocked already."""
    if session.get(CompletionBlock, key) is not None:
        return False
    session.add(CompletionBlock(key=key, text=text_, created_by=actor[:128]))
    return True


def remove_completion_block(session: Session, key: str) -> CompletionBlock | None:
    """Unblock `key`; the removed block, or None when it was not blocked."""
    found = session.get(CompletionBlock, key)
    if found is not None:
        session.delete(found)
        session.flush()
    return found


def add_blocked_word(session: Session, word: str, actor: str) -> bool:
    """Block `word` (search.completions.blocked_word_key); False: blocked already."""
    if session.get(CompletionBlockedWord, word) is not None:
        return False
    session.add(CompletionBlockedWord(word=word, created_by=actor[:128]))
    return True


def remove_blocked_word(session: Session, word: str) -> bool:
    found = session.get(CompletionBlockedWord, word)
    if found is not None:
        session.delete(found)
        session.flush()
    return found is not None

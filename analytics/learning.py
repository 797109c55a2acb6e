"""Learning from use: the search log and the widget's events folded into `learned_evidence`
(aggregates per normalised query and task; the math is in search.learned).

    collect_votes(searches, events, max_position)  -> one Vote per (session, query, task) shown,
                                                      and per query chain (chain_votes)
    aggregate(engine, settings, now)               -> folds the log since the watermark into the table
    load_learned(session)                          -> the table as LearnedPair values
    learned_exemplars(engine, settings, blocked)   -> the pairs that count
    fit_inputs(engine, settings)                   -> what the per-catalog fit uses (those, the blocked
                                                      pairs, and the queries nobody clicks)

**Binding** (issue 17 item 4): an impression or click counts only when it is bound to the
search that produced it (analytics.formulas.bound_to_search): the search is in the log, was made
by the same session (the search log keeps the `session` the search was made with; the search
id is the server's, 80 random bits, never the client's choice), and, for learning, the click's
task is the one the search showed at the click's position, within the first
`LEARNING_MAX_POSITION` results. A forged click (someone else's search id, a task the search
did not show where the click says, k=50 to reach any task) moves nothing.

**One vote per session**: per aggregation window, a (session, query, task) is one vote: clicked
or not, examined at the best position the task was shown to that session for that query. Votes
of a session with more than LEARNING_MAX_VOTES_PER_SESSION votes in the window weigh less
(search.learned.session_weights). A pair counts for ranking only once LEARNING_MIN_SESSIONS
distinct sessions clicked it, or LEARNING_MAJORITY_SESSIONS that are most of the sessions that
clicked anything for its query (search.learned.eligible, `supported`).

**Query chains** (chain_votes; migration 0015 counts them per row): a search that got no kept
click and that its session rephrased until a kept click on task t votes for t under its own
query too (LEARNING_CHAINS). A rephrasing is a *related* next search (analytics.formulas.related:
a shared term, a misspelt word, or an edit), and the clicked search must still be related to the
first: a session that moves on to another subject chains nothing (issue 32 item 3). It is the only vote a query the product answers wrongly can get,
and it keeps such a query from being taken for one nobody clicks.

**Queries nobody clicks** (migrations 0013, 0014): each row also keeps the distinct sessions
(and their networks and verified people) it was shown to, clicked or not; a query shown to
LEARNING_UNCLICKED_SESSIONS sessions from LEARNING_MIN_NETWORKS networks or LEARNING_MIN_PEOPLE
verified people, at most LEARNING_UNCLICKED_CLICK_SHARE of which clicked anything, is negative
evidence for the abstention (search.learned.unclicked_queries).

**No personal data**: the table holds counts per (query, task); session ids are used while
aggregating and never stored there. Rows are not touched by the raw log's retention purge.

**Distinct across windows**: `sessions`, `networks` and `people` are distinct counts over every
window, not sums of each window's: a session (or network, or person) that clicks the pair again
in a later window is the same one. Each row keeps a 64-byte linear-counting sketch of each (search.learned:
`sketch_of`, `sketch_count`; a bit per 1/512 of all keys, no key stored; migration 0011). A row
aggregated before the sketches existed counts its sessions and networks as that many distinct
anonymous ones (`legacy_sketch`).

**Watermark**: the aggregation reads events received after the `learning_state` watermark up to
now - LEARNING_SETTLE_S (so that a session's clicks of the last minutes are counted together
in the next run), and searches from a day before that (an event may come after its search).
The clicks after the watermark wait (waiting_clicks: how many, and from when each run can fold
them in); `python app.py fit` and the task page say so (issue 32 item 4: both said only "up to
date" and "not often enough" while clicks waited).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Iterable, Sequence

import numpy as np
from sqlalchemy import Engine, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from analytics.formulas import as_utc, bound_to_search, group_requests, intents
from analytics.learning_models import LearnedEvidence, LearningState
from analytics.records import EventRecord, SearchRecord
from analytics.store import AnalyticsStore
from catalog.models import utcnow
from search import learned as math
from search.learned import LearnedExemplar, LearnedInputs
from settings import Settings

log = logging.getLogger(__name__)

WATERMARK = "learned_evidence"
ADVISORY_LOCK = 0x7461736B6C726E   # pg_advisory_xact_lock key of the aggregation ("tasklrn")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
SEARCH_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True)
class LearnedPair:
    """One row of learned_evidence (the shared interface with the admin's editor)."""

    query: str
    task_id: str
    sessions: int          # distinct sessions that clicked (lifetime, not decayed; sketch estimate)
    clicks: int            # counted clicks (at most one per session and window)
    examinations: float    # decayed, position-bias-weighted impressions (sum of theta_k)
    relevance: float       # estimated P(relevant | query) in [0, 1] (search.learned.coec_relevance)
    updated_at: datetime
    networks: int = 0      # distinct client networks that clicked (lifetime; sketch estimate; analytics.sources)
    people: int = 0        # distinct verified people that clicked (lifetime; sketch estimate; analytics.sources)
    query_sessions: int | None = None  # distinct sessions that clicked any task for this query (its rows' sketches)
    query_viewers: int | None = None   # distinct sessions shown any result for this query (migration 0013)
    query_viewer_networks: int | None = None   # ... and their distinct networks
    query_viewer_people: int | None = None     # ... and their distinct verified people (migration 0014)
    rephrased_clicks: int = 0   # of `clicks`, those made after rephrasing the query (chain_votes; migration 0015)
    network_sketch: bytes | None = None   # the clicking networks' sketch (search.learned.network_bits: the share rule)


@dataclass(frozen=True)
class Vote:
    session_id: str
    query: str
    task_id: str
    position: int          # best (smallest) position the task was shown at to this session for this query
    clicked: bool
    at: datetime           # the latest of its searches
    network: str | None = None   # the network pseudonym of the session's click (analytics.sources)
    person: str | None = None    # the verified person of the session's search (analytics.sources), if any
    viewer_network: str | None = None   # the network the search's impression (or click) came from
    settled: bool = True         # one of its searches ended a burst of typing (analytics.formulas.group_requests)
    chained: bool = False        # clicked only through a reformulation chain (chain_votes), not on this query's list


# the columns load_learned reads, in this order (plain rows: ORM objects cost 3x at 30,000 rows)
_LOADED = ("query", "task_id", "sessions", "clicks", "examinations", "relevance", "updated_at", "networks", "people",
           "rephrased_clicks", "network_sketch", "session_sketch", "viewer_sketch", "viewer_network_sketch", "viewer_people_sketch")


def load_learned(session, task_id: str | None = None) -> list[LearnedPair]:
    """Every row of learned_evidence, each with its query's distinct clicking sessions (the union
    of the session sketches of the query's rows: search.learned.eligible's majority rule).
    `task_id`: only the rows of the queries that have a row for that task (every row of each, so
    that the per-query counts are the same as in the whole table): the editor's panel of one task
    reads its own queries, not the table. `session`: a SQLAlchemy Session, Connection or Engine."""
    table = LearnedEvidence.__table__
    query = select(*(table.c[name] for name in _LOADED)).order_by(table.c.query, table.c.task_id)
    if task_id is not None:
        query = query.where(table.c.query.in_(select(table.c.query).where(table.c.task_id == task_id)))
    if isinstance(session, Engine):
        with session.connect() as connection:
            rows = connection.execute(query).all()
    else:
        rows = session.execute(query).all()
    # per query, the union of its rows' sketches as integers (search.learned.sketch_union, without
    # a bytes round trip per row), then counted once per query
    clickers: dict[str, int] = defaultdict(int)
    viewers: dict[str, int] = defaultdict(int)
    viewer_networks: dict[str, int] = defaultdict(int)
    viewer_people: dict[str, int] = defaultdict(int)
    unsketched: dict[str, int] = defaultdict(int)   # rows aggregated before 0011: added, never merged
    bits = math.SKETCH_BITS // 8
    for (q, _, sessions, *_, session_sketch, viewer_sketch, viewer_network_sketch, viewer_people_sketch) in rows:
        if session_sketch:
            clickers[q] |= int.from_bytes(session_sketch, "big")
        else:
            unsketched[q] += int(sessions)
        viewers[q] |= int.from_bytes(viewer_sketch or b"", "big")
        viewer_networks[q] |= int.from_bytes(viewer_network_sketch or b"", "big")
        viewer_people[q] |= int.from_bytes(viewer_people_sketch or b"", "big")

    def count(value: int) -> int:
        return math.sketch_count(value.to_bytes(bits, "big")) if value else 0

    per_query = {q: (count(clickers[q]) + unsketched[q], count(seen), count(viewer_networks[q]),
                     count(viewer_people[q]))
                 for q, seen in viewers.items()}   # once per query, not per row
    return [LearnedPair(q, task_id, int(sessions), int(clicks), float(examinations), float(relevance),
                        as_utc(updated_at), int(networks or 0), int(people or 0), *per_query[q],
                        rephrased_clicks=int(rephrased or 0), network_sketch=network_sketch)
            for (q, task_id, sessions, clicks, examinations, relevance, updated_at, networks, people, rephrased,
                 network_sketch, *_) in rows]


def shown_positions(search: SearchRecord, impression: EventRecord | None, click: EventRecord | None,
                    max_position: int) -> dict[str, int]:
    """task -> 1-based position the search showed it at, as far as this evidence says it was
    seen: the impression's list (it must be the search's own results, in order: a client that
    says it showed something else is ignored), else only the clicked task at its position."""
    shown: dict[str, int] = {}
    if impression is not None and impression.task_ids:
        listed = impression.task_ids[:max_position]
        if tuple(search.result_ids[:len(listed)]) == tuple(listed):
            shown.update({task: i + 1 for i, task in enumerate(listed)})
    if click is not None and click.task_id not in shown:
        shown[click.task_id] = click.position
    return shown


def click_counts(search: SearchRecord, event: EventRecord, max_position: int) -> bool:
    """A click counts for learning: bound to its search (same session), at a position within
    the first `max_position` results, naming the task the search showed there."""
    return (event.type == "click" and bound_to_search(search, event) and event.position is not None
            and 1 <= event.position <= min(max_position, len(search.result_ids))
            and search.result_ids[event.position - 1] == event.task_id)


def collect_votes(searches: Iterable[SearchRecord], events: Iterable[EventRecord], max_position: int,
                  earlier: Iterable[EventRecord] = (), chains: bool = True) -> list[Vote]:
    """One vote per (session, query, task) shown to a session (module docstring); searches
    without a session, and events not bound to their search, give none. With `chains`, also the
    votes of reformulation chains whose click is one of `events` (chain_votes); `earlier`: the
    clicks and returns received before the window, which only say whether an earlier search of
    the chain was clicked (their votes were counted in their own window)."""
    events = list(events)
    by_id = {s.id: s for s in searches if s.session_id}
    # a type-ahead request the person typed on from is no query they were shown results for
    settled = {group[-1].id for group in group_requests(by_id.values())}
    impressions: dict[str, EventRecord] = {}
    clicks: dict[str, list[EventRecord]] = defaultdict(list)
    for e in events:
        search = by_id.get(e.search_id)
        if search is None or not bound_to_search(search, e):
            continue
        if e.type == "impression":
            impressions.setdefault(e.search_id, e)
        elif e.type == "click" and click_counts(search, e, max_position):
            clicks[e.search_id].append(e)
    votes: dict[tuple[str, str, str], Vote] = {}
    for search_id in set(impressions) | set(clicks):
        search = by_id[search_id]
        clicked = {e.task_id for e in clicks.get(search_id, ())}
        network = {e.task_id: e.network for e in clicks.get(search_id, ())}
        impression = impressions.get(search_id)
        seen_from = impression.network if impression is not None else next(iter(network.values()), None)
        shown = shown_positions(search, impression, None, max_position)
        for e in clicks.get(search_id, ()):
            shown.setdefault(e.task_id, e.position)
        for task, position in shown.items():
            key = (search.session_id, search.query, task)
            old = votes.get(key)
            at = as_utc(search.at)
            if old is None:
                votes[key] = Vote(search.session_id, search.query, task, position, task in clicked, at,
                                  network.get(task), search.person, seen_from, search_id in settled)
            else:
                votes[key] = Vote(old.session_id, old.query, task, min(old.position, position),
                                  old.clicked or task in clicked, max(old.at, at), old.network or network.get(task),
                                  old.person or search.person, old.viewer_network or seen_from,
                                  old.settled or search_id in settled)
    if chains:
        bound = [e for e in events if e.search_id in by_id and bound_to_search(by_id[e.search_id], e)
                 and (e.type != "click" or click_counts(by_id[e.search_id], e, max_position))]
        before = [e for e in earlier if e.type in ("click", "return") and e.search_id in by_id
                  and bound_to_search(by_id[e.search_id], e)]
        for chain in chain_votes(list(by_id.values()), before, bound, max_position):
            key = (chain.session_id, chain.query, chain.task_id)
            old = votes.get(key)
            if old is None:
                votes[key] = chain
            elif not old.clicked:   # shown on the query's own list, not clicked there: found after rephrasing
                votes[key] = replace(old, clicked=True, chained=True, network=chain.network, at=max(old.at, chain.at))
    return sorted(votes.values(), key=lambda v: (v.query, v.task_id, v.session_id))


def chain_votes(searches: Sequence[SearchRecord], earlier: Sequence[EventRecord], window: Sequence[EventRecord],
                max_position: int) -> list[Vote]:
    """Votes of reformulation chains ("query chains": Radlinski & Joachims, *Query chains:
    learning to rank from implicit feedback*, KDD 2005): a search that got no kept click and
    that its session reformulated, search after search (analytics.formulas.intents: the next
    search within REFORMULATION_WINDOW_S, another query related to it), until a kept click on
    task t on a search still related to the first, is a
    vote for t under its own query as well: the person was looking for t when they typed it. It
    is the only evidence a query the product answers wrongly (or refuses) ever gets: nobody
    clicks the right task under a query that does not show it.

    One vote per chain whose click is one of the `window` events (a chain counts in the window
    of its click), at the position the query showed t (1 where it did not: examined for sure,
    the least credit per click). `window`: the window's bound events, clicks counted for
    learning only; `earlier`: the bound clicks and returns received before it, which only say
    whether a search of the chain was clicked. Like any vote it counts only through the
    distinct-session and distinct-network (or people) rules, so one session chaining its own
    searches moves nothing."""
    in_window = {(e.session_id, e.task_id, as_utc(e.at)): e for e in window if e.type == "click"}
    by_id = {s.id: s for s in searches}
    out = []
    for intent in intents(searches, [*earlier, *window]):
        if intent.followup_task is None or intent.session_id is None:
            continue
        click = in_window.get((intent.session_id, intent.followup_task, as_utc(intent.followup_at)))
        if click is None:
            continue
        shown = intent.result_ids[:max_position]
        position = shown.index(intent.followup_task) + 1 if intent.followup_task in shown else 1
        person = next((by_id[i].person for i in intent.search_ids if by_id[i].person), None)
        out.append(Vote(intent.session_id, intent.query, intent.followup_task, position, True,
                        as_utc(intent.ended_at), click.network, person, click.network, True, chained=True))
    return out


@dataclass
class _Sums:
    clicks: float = 0.0        # decayed, session-weighted clicks
    examinations: float = 0.0  # decayed, session-weighted theta_k
    sessions: float = 0.0      # decayed clicking sessions
    clickers: set = field(default_factory=set)   # the clicking sessions (one click each: one vote per session)
    networks: set = field(default_factory=set)   # networks of the clicking sessions (none: the session itself)
    people: set = field(default_factory=set)     # verified people of the clicking sessions' searches (none: nobody)
    viewers: set = field(default_factory=set)    # every session shown the pair, clicked or not, as its settled query
    viewer_networks: set = field(default_factory=set)   # their networks (none: the session itself)
    viewer_people: set = field(default_factory=set)     # their verified people (none: nobody)
    rephrased: set = field(default_factory=set)  # the clicking sessions whose click came through a chain


def window_sums(votes: Sequence[Vote], now: datetime, half_life_days: float, max_position: int,
                max_votes: int, max_source_pairs: float | None = None) -> tuple[dict[tuple[str, str], _Sums], np.ndarray]:
    """Per (query, task), the decayed sums of one window's votes, and the propensities used.
    `max_source_pairs`: no person, network or session weighs more than that many pairs' worth
    in the propensities (search.learned.source_weights; LEARNING_MAX_NETWORK_PAIRS)."""
    if not votes:
        return {}, math.power_propensities(max_position)
    pair_ids: dict[tuple[str, str], int] = {}
    pairs = np.array([pair_ids.setdefault((v.query, v.task_id), len(pair_ids)) for v in votes])
    positions = np.array([v.position for v in votes])
    clicked = np.array([v.clicked for v in votes], dtype=np.float64)
    # position bias is learnt from clicks on the lists themselves, not from reformulation chains
    direct = np.array([not v.chained for v in votes])
    if direct.any():
        sources = [v.person or v.viewer_network or v.network or f"session:{v.session_id}" for v in votes if not v.chained]
        weights = math.source_weights(sources, pairs[direct], max_source_pairs)
        theta = math.em_propensities(np.unique(pairs[direct], return_inverse=True)[1], positions[direct],
                                     clicked[direct], max_position, weights=weights)
    else:
        theta = math.power_propensities(max_position)
    weights = math.session_weights([v.session_id for v in votes], max_votes)
    ages = np.array([(now - v.at).total_seconds() / 86400 for v in votes])
    d = math.decay(ages, half_life_days) * weights
    sums: dict[tuple[str, str], _Sums] = defaultdict(_Sums)
    for v, dv, position, c in zip(votes, d, positions, clicked):
        s = sums[(v.query, v.task_id)]
        s.examinations += float(dv * theta[position - 1])
        if v.settled:
            s.viewers.add(v.session_id)
            s.viewer_networks.add(v.viewer_network or f"session:{v.session_id}")
            if v.person:
                s.viewer_people.add(v.person)
        if c:
            s.clicks += float(dv)
            s.sessions += float(dv)
            s.clickers.add(v.session_id)
            if v.chained:
                s.rephrased.add(v.session_id)
            s.networks.add(v.network or f"session:{v.session_id}")
            if v.person:
                s.people.add(v.person)
    return dict(sums), theta


def legacy_sketch(count: int) -> bytes:
    """The sketch of `count` distinct anonymous keys: what a row aggregated before the sketches
    (migration 0011) had, so that its counts carry over and only new keys add to them."""
    return math.sketch_of(f"legacy:{i}" for i in range(count))


def merge(old: LearnedEvidence | None, new: _Sums, now: datetime, half_life_days: float) -> dict:
    """The row after folding `new` (already decayed to `now`) into `old` (decayed from its
    updated_at to `now`). Sessions and networks are distinct counts over both (their sketches'
    union), never a sum: a session that clicked before and clicks again is one session. People
    likewise; a row aggregated before them (migration 0012) starts at none."""
    session_sketch, network_sketch = math.sketch_of(new.clickers), math.sketch_of(new.networks, math.NETWORK_SKETCH_BITS)
    people_sketch = math.sketch_of(new.people)
    viewer_sketch, viewer_network_sketch = math.sketch_of(new.viewers), math.sketch_of(new.viewer_networks)
    viewer_people_sketch = math.sketch_of(new.viewer_people)
    if old is None:
        clicks, exams, sessions, n_clicks = new.clicks, new.examinations, new.sessions, len(new.clickers)
        rephrased = len(new.rephrased)
    else:
        d = float(math.decay((now - as_utc(old.updated_at)).total_seconds() / 86400, half_life_days))
        clicks = old.decayed_clicks * d + new.clicks
        exams = old.examinations * d + new.examinations
        sessions = old.decayed_sessions * d + new.sessions
        n_clicks = old.clicks + len(new.clickers)
        rephrased = int(old.rephrased_clicks or 0) + len(new.rephrased)
        session_sketch = math.sketch_union(old.session_sketch or legacy_sketch(int(old.sessions)), session_sketch)
        network_sketch = math.sketch_union(old.network_sketch or legacy_sketch(int(old.networks or 0)), network_sketch)
        people_sketch = math.sketch_union(old.people_sketch, people_sketch)
        viewer_sketch = math.sketch_union(old.viewer_sketch, viewer_sketch)
        viewer_network_sketch = math.sketch_union(old.viewer_network_sketch, viewer_network_sketch)
        viewer_people_sketch = math.sketch_union(old.viewer_people_sketch, viewer_people_sketch)
    return {"sessions": math.sketch_count(session_sketch), "clicks": n_clicks, "examinations": exams,
            "decayed_clicks": clicks, "decayed_sessions": sessions, "networks": math.sketch_count(network_sketch),
            "people": math.sketch_count(people_sketch), "session_sketch": session_sketch,
            "network_sketch": network_sketch, "people_sketch": people_sketch,
            "viewers": math.sketch_count(viewer_sketch), "viewer_networks": math.sketch_count(viewer_network_sketch),
            "viewer_sketch": viewer_sketch, "viewer_network_sketch": viewer_network_sketch,
            "viewer_people": math.sketch_count(viewer_people_sketch), "viewer_people_sketch": viewer_people_sketch,
            "rephrased_clicks": rephrased, "relevance": math.coec_relevance(clicks, exams), "updated_at": now}


def _watermark(connection) -> datetime:
    row = connection.execute(select(LearningState.at).where(LearningState.name == WATERMARK)).first()
    return as_utc(row[0]) if row else EPOCH


def _upsert(connection, table, values: dict, keys: Sequence[str]) -> None:
    insert = pg_insert if connection.dialect.name == "postgresql" else sqlite_insert
    statement = insert(table).values(**values)
    connection.execute(statement.on_conflict_do_update(index_elements=list(keys),
                                                      set_={k: v for k, v in values.items() if k not in keys}))


def aggregate(engine: Engine, settings: Settings, now: datetime | None = None) -> dict:
    """Fold the searches and events received since the watermark (up to now - LEARNING_SETTLE_S)
    into learned_evidence; returns what it did. Idempotent per window: the watermark moves in
    the same transaction as the rows."""
    now = now or utcnow()
    until = now - timedelta(seconds=settings.learning_settle_s)
    store = AnalyticsStore(engine)
    with engine.connect() as connection:
        since = _watermark(connection)
    if until <= since:
        return {"status": "up to date", "votes": 0, "clicks": 0, "pairs": 0}
    searches = store.searches(max(since - SEARCH_LOOKBACK, EPOCH), until)
    events = [e for e in store.events(since, until) if as_utc(e.at) >= since]
    # whether an earlier search of a reformulation chain was clicked (chain_votes)
    earlier = store.events(max(since - SEARCH_LOOKBACK, EPOCH), since, types=("click", "return")) \
        if settings.learning_chains else []
    votes = collect_votes(searches, events, settings.learning_max_position, earlier, settings.learning_chains)
    sums, theta = window_sums(votes, now, settings.learning_half_life_days, settings.learning_max_position,
                              settings.learning_max_votes_per_session, settings.learning_max_network_pairs or None)
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":   # one aggregation at a time across processes
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK})
        # (SQLite: a second writer whose snapshot is stale fails to write instead of counting twice)
        if _watermark(connection) != since:
            return {"status": "another process aggregated", "votes": 0, "clicks": 0, "pairs": 0}
        table = LearnedEvidence.__table__
        existing = {(r.query, r.task_id): r for r in connection.execute(select(table))}
        for (query, task_id), new in sums.items():
            row = merge(existing.get((query, task_id)), new, now, settings.learning_half_life_days)
            _upsert(connection, table, {"query": query, "task_id": task_id, **row}, ("query", "task_id"))
        _upsert(connection, LearningState.__table__, {"name": WATERMARK, "at": until}, ("name",))
    log.info("learning: %d votes from %d searches and %d events folded into %d pairs", len(votes), len(searches),
             len(events), len(sums))
    return {"status": "aggregated", "votes": len(votes), "clicks": sum(1 for v in votes if v.clicked),
            "pairs": len(sums), "until": until.isoformat(),
            "propensities": [round(float(t), 4) for t in theta]}


def learned_exemplars(engine: Engine, settings: Settings, blocked: frozenset[tuple[str, str]] = frozenset(),
                      task_ids: Iterable[str] | None = None) -> tuple[LearnedExemplar, ...]:
    """Aggregate what is new, then the pairs that count (search.learned.eligible): what the
    per-catalog fit uses as learned evidence."""
    aggregate(engine, settings)
    return math.eligible(load_learned(engine), math.CountingRule(**counting_rule(settings)), blocked, task_ids)


def counting_rule(settings: Settings) -> dict:
    """The thresholds a learned pair must meet under these settings, as the fields of
    search.learned.CountingRule (what eligible and shortfall take): the one place they are read."""
    return {"min_sessions": settings.learning_min_sessions, "min_relevance": settings.learning_min_relevance,
            "min_networks": settings.learning_min_networks, "min_people": settings.learning_min_people,
            "majority_sessions": settings.learning_majority_sessions,
            "max_network_share": settings.learning_max_network_share,
            "max_network_pairs": settings.learning_max_network_pairs or None}


def blocked_pairs(engine: Engine) -> frozenset[tuple[str, str]]:
    """The (query, task) pairs the admin blocked (catalog.store.learned_blocks, part of the
    catalog's versioned edits; empty until that exists)."""
    from sqlalchemy.orm import Session

    import catalog.store

    blocks = getattr(catalog.store, "learned_blocks", None)
    if blocks is None:
        return frozenset()
    with Session(engine) as session:
        return frozenset(blocks(session))


def unclicked_rule(settings: Settings) -> dict:
    """The keywords of search.learned.unclicked_queries under these settings."""
    return {"min_sessions": settings.learning_unclicked_sessions, "min_networks": settings.learning_min_networks,
            "min_people": settings.learning_min_people,
            "max_click_share": settings.learning_unclicked_click_share,
            "max_age_days": settings.learning_half_life_days}


def learned_and_unclicked(pairs: Sequence[LearnedPair], settings: Settings, now: datetime | None = None
                          ) -> tuple[tuple[LearnedExemplar, ...], tuple[str, ...]]:
    """(the pairs that count, the queries nobody clicks) under these settings: an unclicked
    query never has a pair that counts. What the fit takes and what the dashboard shows."""
    learned = math.eligible(pairs, math.CountingRule(**counting_rule(settings)))
    return learned, math.unclicked_queries(pairs, math.UnclickedRule(**unclicked_rule(settings)),
                                           frozenset(e.query for e in learned), now)


def fit_inputs(engine: Engine, settings: Settings, now: datetime | None = None) -> LearnedInputs:
    """What a per-catalog fit takes from use (serving.service.SearchService.learned_evidence):
    the eligible learned exemplars (after folding in the log since the last run), the admin's
    blocked pairs (the fit drops those: search.fitting.usable_learned), and the queries people
    were shown results for and did not click (search.learned.unclicked_queries: negative
    evidence for the abstention; none of them a query with a pair that counts)."""
    now = now or utcnow()
    aggregate(engine, settings, now)
    learned, unclicked = learned_and_unclicked(load_learned(engine), settings, now)
    return LearnedInputs(learned, blocked_pairs(engine), unclicked)


# -- what waits: clicks received since the last aggregation (issue 32 item 4) --------------------
@dataclass(frozen=True)
class Waiting:
    """The clicks received after the aggregation watermark: no fit has folded them in yet.
    Aggregation reads events up to now - LEARNING_SETTLE_S only, so a click received at t is
    folded in by the first fit (or aggregation) at or after t + LEARNING_SETTLE_S."""

    clicks: int
    first_counts_at: datetime | None = None   # the oldest of them can be folded in from then
    last_counts_at: datetime | None = None    # ... and the newest

    def ready(self, now: datetime) -> bool:
        """Every waiting click can be folded in by a fit run at `now`."""
        return self.last_counts_at is not None and self.last_counts_at <= now


def waiting_clicks(engine: Engine, settings: Settings, now: datetime | None = None,
                   task_id: str | None = None) -> Waiting:
    """The click events received at or after the watermark (of `task_id` only, when given), and
    when they can count: received_at + LEARNING_SETTLE_S (aggregate's window ends there). These
    are clicks as received: a click that turns out unbound to its search (analytics.formulas.
    bound_to_search) is read then and counts for nothing."""
    now = now or utcnow()
    with engine.connect() as connection:
        since = _watermark(connection)
    received = [e.at for e in AnalyticsStore(engine).events(since, now + timedelta(days=1), types=("click",))
                if task_id is None or e.task_id == task_id]
    if not received:
        return Waiting(0)
    settle = timedelta(seconds=settings.learning_settle_s)
    return Waiting(len(received), as_utc(min(received)) + settle, as_utc(max(received)) + settle)


def _clock(moment: datetime) -> str:
    return f"{as_utc(moment):%Y-%m-%d %H:%M} UTC"


def describe_waiting(waiting: Waiting, settings: Settings, now: datetime | None = None, what: str = "clicks") -> str:
    """One sentence saying how many clicks wait and when they count (the fit CLI and the task
    page say the same)."""
    now = now or utcnow()
    if not waiting.clicks:
        return f"No {what} wait: every click received so far has been folded in."
    count = f"{waiting.clicks} {what if waiting.clicks != 1 else what.rstrip('s')}"
    if waiting.ready(now):
        return f"{count} not folded in yet: the next fit folds them in."
    settle = f"LEARNING_SETTLE_S={settings.learning_settle_s:g}"
    if waiting.first_counts_at <= now or waiting.first_counts_at == waiting.last_counts_at:
        return (f"{count} wait: a fit folds them in from {_clock(waiting.last_counts_at)} "
                f"({settle}: a click counts that long after it was received).")
    return (f"{count} wait: a fit folds in the first from {_clock(waiting.first_counts_at)} and all of them from "
            f"{_clock(waiting.last_counts_at)} ({settle}: a click counts that long after it was received).")


def fit_learning_summary(folded: dict, engine: Engine, settings: Settings, now: datetime | None = None) -> dict:
    """What the learning side of a fit did, for `python app.py fit`: the clicks and pairs the
    aggregation folded in (`folded`: aggregate's answer), how many pairs count now, and the
    clicks that still wait (waiting_clicks) with when they count. A fit that says "up to date"
    may still have folded clicks in: they were too few to make a pair count."""
    now = now or utcnow()
    waiting = waiting_clicks(engine, settings, now)
    counting = math.eligible(load_learned(engine), math.CountingRule(**counting_rule(settings)), blocked_pairs(engine))
    if folded.get("status") == "aggregated" and folded.get("votes"):
        did = (f"folded {folded['clicks']} clicks ({folded['votes']} votes) into {folded['pairs']} query-task pairs, "
               f"up to {_clock(datetime.fromisoformat(folded['until']))}")
    elif folded.get("status") == "another process aggregated":
        did = "another process was folding the same clicks in; nothing folded here"
    else:
        did = "nothing new to fold in"
    return {"aggregation": folded.get("status"), "clicks_folded": int(folded.get("clicks", 0)),
            "pairs_updated": int(folded.get("pairs", 0)), "pairs_that_count": len(counting),
            "clicks_waiting": waiting.clicks,
            "waiting_count_from": waiting.last_counts_at.isoformat() if waiting.last_counts_at else None,
            "message": f"Learning from use: {did}; {len(counting)} pairs count. {describe_waiting(waiting, settings, now)}"}

"""Search analytics as pure functions over the search log and the widget's events.

Nothing here reads a database or a clock: every function takes lists of SearchRecord and
EventRecord (analytics.records) and returns values, so each formula is tested on hand-made logs
with known answers (tests/test_analytics_formulas.py). The pipeline:

    intents(searches, events)   -> one Intent per search as a person means it (keystrokes grouped)
    measure(intents)            -> Measures: searches, no-result rate, CTR, average click position,
                                   abandonment rate, reformulation rate
    by_day(intents, first, last) / by_query(intents) -> the same measures per UTC day / per query

Definitions (the constants below are part of them):

* **A search** is what a person settled on, not a request (issue 44 item 3). A type-ahead box
  sends a request per keystroke pause, so a session's requests are cut into searches the way
  site-search analytics do: a search is the text the person stopped on, and the texts passed
  through while typing belong to it without naming it. A text (consecutive requests of one
  query: the instant list, the re-ranked one, Enter) is *settled* (`settles`) when the person
  clicked one of its results, left on it (the session's last text), or looked at it long enough
  before the box changed: at least SETTLE_GAP_S before cutting it back, fixing or replacing it
  (a box cleared and retyped, even with the same first letters, even within seconds), at least
  EXTEND_SETTLE_S before typing on after a finished word; typing on inside a word never settles
  it (up to TYPING_ON_GAP_S: "crim", "medica", "family income el" are fragments). A search the
  session already searched within REPEAT_WINDOW_S (Back re-runs it on the page a task was
  opened from) is the same search again, counted once; its requests and clicks join it.
  Requests without a session id cannot be grouped: each is a search of its own. An intent's
  query and results are those of its last request (what the person finally saw); its clicks
  are the clicks on any of its requests, each bound to its request (`bound_to_search`: sent by
  the session that made the search) and on a task that request showed (a click on a task it
  did not show, or from another session, is ignored: the widget cannot have sent it, so it
  says nothing about the search). ops/simulate_sessions.py measures the cut on simulated
  keystroke sessions whose searches are known (docs/admin.md).
* **No result**: the intent's last request showed no task (empty list, or "no confident match").
* **Click-through rate** = searches with at least one click / searches.
* **Average click position** = mean 1-based position over all clicks of the searches (None
  without clicks).
* **Reformulated**: the search got no click at all and the same session's next search starts
  at most REFORMULATION_WINDOW_S after this one's last request, with a different query that is
  *related* to it (`related`: a shared term after normalisation and stemming, a word of one
  that is a typo of a word of the other, or one query an edit of the other). A later search on
  another subject is a new need, not a rephrasing (issue 32 item 3: "cacfp", "how do i enroll a
  child" and "kids shots" in one session are three needs). A clicked search is never
  reformulated, even when the person came back and searched again (issue 44 item 3: a query read
  100% clicked and 100% reformulated): each search ends one way, so
  searches = clicked + reformulated + abandoned + no result and left.
  **Reformulation rate** = reformulated searches / searches.
* **Abandoned**: the search showed results, got no click and was not reformulated: the person
  left. (A no-result search that was not reformulated is neither: it is counted as no result.)
  **Abandonment rate** = abandoned searches / searches.
* **Suggested gold** of a query ("Found after rephrasing"): the task most often clicked (kept
  click) at the end of a chain of reformulations that started from a search for that query; the task the people who
  did not find it under that query found under another (ties: the smaller task id). The chain
  ends at the first search that is not reformulated; its kept click is the chain's task only
  when that search's query is still related to the chain's first one (a chain drifting from
  "kids shots" through "kids enrolment" to "enrolment form" does not say what "kids shots"
  meant).

Every rate is None when there is no search to divide by.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from typing import Iterable, Sequence

from rapidfuzz.distance import Levenshtein

from analytics.records import EventRecord, SearchRecord
from lexicon.text import terms, words

#: A text shown at least this long (from its first request to the next text's) before the person
#: cut it back, fixed it or replaced it was a search they settled on; shorter, it was passed
#: through while typing (a typo noticed and fixed, a box cleared at once). Fitted on the
#: simulated sessions of ops/simulate_sessions.py (docs/admin.md, "Search analytics").
SETTLE_GAP_S = 1.0
#: ... and before the person typed on after a finished word ("lead" -> "lead screening"): a pause
#: between words while composing a query is longer than one inside a word, so this is longer.
EXTEND_SETTLE_S = 3.0
#: Typing on inside a word continues the text whatever the pause up to this long (a slow typist
#: hunting for a letter; Algolia aggregates the prefixes of one query over 30 s the same way).
TYPING_ON_GAP_S = 30.0
#: The same query searched again by the same session within this long (Back on the page a task
#: was opened from re-runs it, the widget keeps it 30 minutes) is the same search, counted once.
REPEAT_WINDOW_S = 1800.0
#: An edit that is not at the end of the query is still an edit of it (`is_edit`, used by
#: `related`) if it changes at most this many characters (a typo fixed mid-word) ...
MAX_TYPO_EDITS = 2
#: ... and both queries are at least this long.
MIN_TYPO_EDIT_CHARS = 4
#: Longest gap from a search's last request to the next search for that to be its reformulation
#: (and that search must be `related`: the gap alone chained every later search of a session).
REFORMULATION_WINDOW_S = 300.0
#: Two words are the same word misspelt when both have at least this many characters ...
MIN_TYPO_WORD_CHARS = 4
#: ... and differ by at most this many single-character edits (Levenshtein distance).
MAX_TYPO_WORD_EDITS = 2
#: The low-CTR list only ranks queries searched at least this often (one search is no evidence).
MIN_SEARCHES_FOR_LOW_CTR = 3
#: ... whose click-through rate is below this: a query most of whose searches were clicked is
#: not a low click-through query, however few queries there are to list (issue 32 item 3: a
#: query at 100% was listed because the list was only sorted, never cut).
LOW_CTR_BELOW = 0.5


@dataclass(frozen=True)
class Click:
    task_id: str
    position: int
    at: datetime
    kept: bool          # no `return` event for this search and task


@dataclass(frozen=True)
class Intent:
    """One search as a person means it: the requests of one burst of typing."""

    session_id: str | None
    search_ids: tuple[str, ...]
    started_at: datetime
    ended_at: datetime
    query: str                       # the last request's normalised query
    result_ids: tuple[str, ...]      # the last request's results
    no_result: bool
    degraded: bool                   # any of its requests was answered degraded
    clicks: tuple[Click, ...] = ()
    reformulated: bool = False
    followup_task: str | None = None  # kept click at the end of its reformulation chain
    followup_at: datetime | None = None  # ... and when that click was made

    @property
    def clicked(self) -> bool:
        return bool(self.clicks)

    @property
    def kept_click(self) -> Click | None:
        """The first click the person did not come back from."""
        return next((c for c in self.clicks if c.kept), None)

    @property
    def abandoned(self) -> bool:
        return not self.no_result and not self.clicked and not self.reformulated

    @property
    def day(self) -> date:
        return as_utc(self.started_at).date()


@dataclass(frozen=True)
class Measures:
    """Counts over a set of searches (intents) and the rates derived from them."""

    searches: int = 0
    no_result: int = 0
    clicked: int = 0
    clicks: int = 0
    click_position_sum: int = 0
    abandoned: int = 0
    reformulated: int = 0

    def _rate(self, count: int) -> float | None:
        return count / self.searches if self.searches else None

    @property
    def no_result_rate(self) -> float | None:
        return self._rate(self.no_result)

    @property
    def click_through_rate(self) -> float | None:
        return self._rate(self.clicked)

    @property
    def abandonment_rate(self) -> float | None:
        return self._rate(self.abandoned)

    @property
    def reformulation_rate(self) -> float | None:
        return self._rate(self.reformulated)

    @property
    def average_click_position(self) -> float | None:
        return self.click_position_sum / self.clicks if self.clicks else None

    def as_dict(self) -> dict:
        return {"searches": self.searches, "no_result_rate": self.no_result_rate,
                "click_through_rate": self.click_through_rate,
                "average_click_position": self.average_click_position,
                "abandonment_rate": self.abandonment_rate, "reformulation_rate": self.reformulation_rate,
                "counts": {"no_result": self.no_result, "clicked": self.clicked, "clicks": self.clicks,
                           "abandoned": self.abandoned, "reformulated": self.reformulated}}


@dataclass(frozen=True)
class QueryReport:
    query: str
    measures: Measures
    suggested_gold: str | None


def as_utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC datetime (SQLite hands back naive ones, which are UTC)."""
    if moment.tzinfo is timezone.utc:
        return moment
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


# -- segmenting a session's requests into searches ----------------------------------------------
def is_edit(previous: str, current: str) -> bool:
    """`current` extends or edits `previous`: one is a prefix of the other (typing on, deleting
    at the end, the same text again), or both have at least MIN_TYPO_EDIT_CHARS characters and
    differ by at most MAX_TYPO_EDITS single-character insertions, deletions or substitutions.
    (Lexical only: whether an edit ends a search is `settles`' question, which also asks how long
    the text was shown.)"""
    if previous.startswith(current) or current.startswith(previous):
        return True
    if min(len(previous), len(current)) < MIN_TYPO_EDIT_CHARS:
        return False
    return Levenshtein.distance(previous, current, score_cutoff=MAX_TYPO_EDITS) <= MAX_TYPO_EDITS


def types_on_mid_word(previous: str, current: str) -> bool:
    """`current` is `previous` typed on inside its last word ("crim" -> "crimi", "family income el"
    -> "family income elig"): the person had not finished a word, so `previous` was not a query."""
    return (len(current) > len(previous) > 0 and current.startswith(previous)
            and previous[-1].isalnum() and current[len(previous)].isalnum())


def settles(previous: str, current: str | None, shown_s: float, clicked: bool = False) -> bool:
    """Whether the text `previous`, shown for `shown_s` seconds before the box said `current`
    (None: nothing followed, the person left), was a search the person settled on, rather than
    a text passed through while typing (module docstring, "A search"):

    * a click on its results, or leaving on it: settled;
    * typed on inside a word (types_on_mid_word) within TYPING_ON_GAP_S: passed through, however
      long the pause (a slow typist hunting for a letter, "medica" ... "medicaid");
    * typed on at a word boundary ("lead" -> "lead screening"): settled when shown at least
      EXTEND_SETTLE_S (the person read the results, then narrowed them), else passed through;
    * any other change (cut back, a typo fixed, the box cleared and retyped, another text):
      settled when shown at least SETTLE_GAP_S, else passed through (a typo noticed while
      typing is fixed within a second; a text the person read before changing it was searched).
    """
    if clicked or current is None:
        return True
    if types_on_mid_word(previous, current):
        return shown_s > TYPING_ON_GAP_S
    if current.startswith(previous):
        return shown_s >= EXTEND_SETTLE_S
    return shown_s >= SETTLE_GAP_S


def _longest_pause(run: list[SearchRecord], following: SearchRecord | None) -> float:
    """The longest pause (seconds) the person made on the text of `run` (its requests) before
    the box said `following`'s text: between two keystrokes that sent it (typing a space sends
    the same text again) or from the last one to `following`. A re-ranked request is the widget
    asking again after a pause, not a keystroke, so the pause runs on through it."""
    if following is None:
        return 0.0
    typed = [r for r in run if not r.rerank] or run[:1]
    moments = [as_utc(r.at) for r in typed] + [as_utc(following.at)]
    return max((b - a).total_seconds() for a, b in zip(moments, moments[1:]))


def _session_segments(records: list[SearchRecord], clicked: set[str]
                      ) -> tuple[list[list[SearchRecord]], list[tuple[int, SearchRecord]]]:
    """One session's requests (time order) cut into searches: each search is the requests up to
    and including the last request of a text the person settled on (`settles`); the fragments
    passed through on the way belong to it but never name it. Consecutive requests of one text
    (the instant list, then the re-ranked one; Enter) are one text, shown from its first request.
    A search whose query the session already searched within REPEAT_WINDOW_S (Back on the page
    a task was opened from re-runs it; the same words typed again) is that search again: its
    requests join it (GA's "unique searches": one keyword counted once per session).

    Returns the searches and, in time order, each time one was searched: (index of the search,
    that time's first request), which says what the session searched next (`intents`)."""
    runs: list[list[SearchRecord]] = []
    for record in records:
        if runs and runs[-1][-1].query == record.query:
            runs[-1].append(record)
        else:
            runs.append([record])
    segments: list[list[SearchRecord]] = []
    pending: list[SearchRecord] = []
    for index, run in enumerate(runs):
        pending.extend(run)
        following = runs[index + 1][0] if index + 1 < len(runs) else None
        shown = _longest_pause(run, following)
        if settles(run[0].query, following.query if following is not None else None, shown,
                   any(r.id in clicked for r in run)):
            segments.append(pending)
            pending = []
    # the same query searched again within the window: the same search (repeats merged)
    merged: list[list[SearchRecord]] = []
    latest: dict[str, int] = {}
    occurrences: list[tuple[int, SearchRecord]] = []
    for segment in segments:
        last = segment[-1]
        home = latest.get(last.query)
        if home is None or (as_utc(last.at) - as_utc(merged[home][0].at)).total_seconds() > REPEAT_WINDOW_S:
            home = len(merged)
            merged.append([])
            latest[last.query] = home
        merged[home].extend(segment)
        occurrences.append((home, segment[0]))
    return merged, occurrences


def _segments(searches: Iterable[SearchRecord], events: Iterable[EventRecord]
              ) -> tuple[list[list[SearchRecord]], dict[int, tuple[int, SearchRecord]]]:
    """The searches (group_requests) and, for each search that its session searched something
    else after, (index of that next search, the first request of that time)."""
    ordered = sorted(searches, key=lambda s: (as_utc(s.at), s.id))
    by_id = {s.id: s for s in ordered}
    clicked = {e.search_id for e in events if e.type == "click" and e.search_id in by_id
               and bound_to_search(by_id[e.search_id], e) and e.task_id in by_id[e.search_id].result_ids}
    per_session: dict[str, list[SearchRecord]] = defaultdict(list)
    groups: list[list[SearchRecord]] = []
    for record in ordered:
        if record.session_id:
            per_session[record.session_id].append(record)
        else:
            groups.append([record])
    following: dict[int, tuple[int, SearchRecord]] = {}
    for records in per_session.values():
        merged, occurrences = _session_segments(records, clicked)
        base = len(groups)
        groups.extend(merged)
        # what the session searched after each search's LAST time (Back re-runs included)
        for k, (home, _first) in enumerate(occurrences):
            if k + 1 == len(occurrences):
                following.pop(base + home, None)
            elif occurrences[k + 1][0] != home:
                following[base + home] = (base + occurrences[k + 1][0], occurrences[k + 1][1])
    order = sorted(range(len(groups)), key=lambda i: (as_utc(groups[i][0].at), groups[i][0].id))
    position = {old: new for new, old in enumerate(order)}
    return ([groups[i] for i in order],
            {position[i]: (position[j], first) for i, (j, first) in following.items()})


def group_requests(searches: Iterable[SearchRecord], events: Iterable[EventRecord] = ()) -> list[list[SearchRecord]]:
    """The requests grouped into searches (`_session_segments` per session), in the order of each
    search's first request (ties: its id); a group's last request is of the text it searched.
    Requests without a session id cannot be grouped: each is a search of its own. `events`: the
    clicks that end a search on the text clicked (bound to their search, on a task it showed)."""
    return _segments(searches, events)[0]


def _misspelt(word: str, other: str) -> bool:
    """`word` and `other` are one word, one of them misspelt: both at least MIN_TYPO_WORD_CHARS
    long and at most MAX_TYPO_WORD_EDITS Levenshtein edits apart ("recrds" / "records")."""
    if min(len(word), len(other)) < MIN_TYPO_WORD_CHARS:
        return False
    return Levenshtein.distance(word, other, score_cutoff=MAX_TYPO_WORD_EDITS) <= MAX_TYPO_WORD_EDITS


def related(previous: str, current: str) -> bool:
    """Whether `current` can be a rephrasing of `previous` (both normalised queries): the person
    is still after the same thing. Lexical evidence only, so that it is pure and cheap:

    * one query is an edit of the other (`is_edit`: typed on, cut back, a typo fixed), or
    * they share a term after normalisation, stopwords removed and stemming (lexicon.text.terms:
      "immunization recrds" / "immunization records", "lead screening" / "screen for lead"), or
    * a word of one is a misspelling of a word of the other (`_misspelt`: "imunization" /
      "immunisation").

    Queries that share nothing but stopwords are unrelated: "cacfp", "how do i enroll a child",
    "bus driver background check" and "kids shots" are four needs, not one need rephrased four
    times (issue 32 item 3). The price: a paraphrase with no word in common ("kids shots" /
    "vaccination records") is not seen as one; embedding similarity would catch it but needs the
    embedding service, which a pure formula over the log cannot call."""
    if is_edit(previous, current):
        return True
    if set(terms(previous)) & set(terms(current)):
        return True
    return any(_misspelt(a, b) for a in set(words(previous)) for b in set(words(current)))


# -- attaching events and reformulations -----------------------------------------------------
def bound_to_search(search: SearchRecord, event: EventRecord) -> bool:
    """An event is bound to the search it names when it is that search's (the id is the server's,
    80 random bits: analytics.records.new_search_id) and it comes from the session that made the
    search. A search made without a session binds no event: anyone could claim it."""
    return event.search_id == search.id and search.session_id is not None and event.session_id == search.session_id


def clicks_by_search(events: Iterable[EventRecord]) -> dict[str, list[tuple[Click, str | None]]]:
    """Click events per search id (with the session that sent each), each marked kept unless a
    `return` event of the same session names the same search and task."""
    events = list(events)
    returned = {(e.search_id, e.task_id, e.session_id) for e in events if e.type == "return"}
    clicks: dict[str, list[tuple[Click, str | None]]] = defaultdict(list)
    for e in sorted((e for e in events if e.type == "click"), key=lambda e: as_utc(e.at)):
        kept = (e.search_id, e.task_id, e.session_id) not in returned
        clicks[e.search_id].append((Click(e.task_id, e.position, e.at, kept), e.session_id))
    return clicks


def _intent(group: list[SearchRecord], clicks: dict[str, list[tuple[Click, str | None]]]) -> Intent:
    last = group[-1]
    found = sorted((c for s in group for c, session in clicks.get(s.id, ())
                    if c.task_id in s.result_ids and s.session_id is not None and session == s.session_id),
                   key=lambda c: as_utc(c.at))
    return Intent(session_id=last.session_id, search_ids=tuple(s.id for s in group),
                  started_at=as_utc(group[0].at), ended_at=as_utc(last.at), query=last.query,
                  result_ids=tuple(last.result_ids), no_result=last.no_result,
                  degraded=any(s.degraded for s in group), clicks=tuple(found))


def _reformulates(intent: Intent, following: Intent | None, next_at: datetime | None) -> bool:
    """`following` (what the session searched next, from `next_at`) rephrases `intent`: `intent`
    got no click at all (a search is clicked or reformulated, never both: a click the person came
    back from still counts as its click), the next search started within REFORMULATION_WINDOW_S
    of its last request, with another query that is `related` to it."""
    if following is None or next_at is None or intent.clicked:
        return False
    gap = (as_utc(next_at) - intent.ended_at).total_seconds()
    return gap <= REFORMULATION_WINDOW_S and following.query != intent.query and related(intent.query, following.query)


def intents(searches: Iterable[SearchRecord], events: Iterable[EventRecord]) -> list[Intent]:
    """The searches as people mean them (group_requests), in time order, with their clicks,
    whether each was reformulated, and the task clicked at the end of its reformulation chain.
    Events whose search id is not among `searches` are ignored (see unmatched_events)."""
    events = list(events)
    clicks = clicks_by_search(events)
    groups, nexts = _segments(searches, events)
    found = [_intent(group, clicks) for group in groups]
    following = {index: after for index, (after, _first) in nexts.items()}
    reformulated = [_reformulates(intent, found[following[i]] if i in following else None,
                                  nexts[i][1].at if i in nexts else None)
                    for i, intent in enumerate(found)]
    result = []
    for index, intent in enumerate(found):
        followup = None
        step, seen = index, {index}
        while reformulated[step]:
            step = following[step]
            if step in seen:   # cannot happen (each step is searched after the last); never loop
                break
            seen.add(step)
            kept = found[step].kept_click
            if kept is not None:
                # still the need the chain started with (module docstring: Suggested gold)
                if related(intent.query, found[step].query):
                    followup = kept
                break
        result.append(replace(intent, reformulated=reformulated[index],
                              followup_task=followup.task_id if followup else None,
                              followup_at=followup.at if followup else None))
    return result


def unmatched_events(searches: Iterable[SearchRecord], events: Iterable[EventRecord]) -> int:
    """Events whose search id is not in the search log (dropped, purged, or made up): not counted."""
    known = {s.id for s in searches}
    return sum(1 for e in events if e.search_id not in known)


# -- measures --------------------------------------------------------------------------------
def measure(found: Iterable[Intent]) -> Measures:
    """The counts of Measures over `found` (see the module docstring for each definition)."""
    searches = no_result = clicked = clicks = position_sum = abandoned = reformulated = 0
    for intent in found:
        searches += 1
        no_result += intent.no_result
        clicked += intent.clicked
        clicks += len(intent.clicks)
        position_sum += sum(c.position for c in intent.clicks)
        abandoned += intent.abandoned
        reformulated += intent.reformulated
    return Measures(searches, no_result, clicked, clicks, position_sum, abandoned, reformulated)


def by_day(found: Sequence[Intent], first: date, last: date) -> list[tuple[date, Measures]]:
    """Measures per UTC day (of each search's first request) from `first` to `last` inclusive,
    days without searches included (with zero searches and None rates)."""
    per_day: dict[date, list[Intent]] = defaultdict(list)
    for intent in found:
        per_day[intent.day].append(intent)
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    return [(day, measure(per_day.get(day, ()))) for day in days]


def suggested_gold(found: Iterable[Intent]) -> str | None:
    """The task most often found after reformulating these searches (ties: smallest id)."""
    counts = Counter(i.followup_task for i in found if i.followup_task)
    if not counts:
        return None
    return min(counts, key=lambda task: (-counts[task], task))


def by_query(found: Iterable[Intent]) -> list[QueryReport]:
    """Measures and suggested gold per (final, normalised) query, most searched first."""
    per_query: dict[str, list[Intent]] = defaultdict(list)
    for intent in found:
        per_query[intent.query].append(intent)
    reports = [QueryReport(query, measure(group), suggested_gold(group)) for query, group in per_query.items()]
    return sorted(reports, key=lambda r: (-r.measures.searches, r.query))


def top_no_result_queries(reports: Iterable[QueryReport], limit: int = 20) -> list[QueryReport]:
    """Queries with no-result searches, the most no-result searches first (then the query)."""
    hits = [r for r in reports if r.measures.no_result]
    return sorted(hits, key=lambda r: (-r.measures.no_result, r.query))[:limit]


def low_ctr_queries(reports: Iterable[QueryReport], limit: int = 20,
                    min_searches: int = MIN_SEARCHES_FOR_LOW_CTR, below: float = LOW_CTR_BELOW) -> list[QueryReport]:
    """Queries searched at least `min_searches` times that showed results at least once and
    whose click-through rate is under `below`, lowest click-through rate first (then the most
    searched, then the query)."""
    hits = [r for r in reports if r.measures.searches >= min_searches and r.measures.no_result < r.measures.searches
            and r.measures.click_through_rate < below]
    return sorted(hits, key=lambda r: (r.measures.click_through_rate, -r.measures.searches, r.query))[:limit]

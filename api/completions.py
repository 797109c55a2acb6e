"""The I/O edge of query completions (search.completions): which `Completions` serve the live
index, and the popular searches and the admin's exclusion list read from the analytics store.
/api/search adds them to every answer (api.search).

**When they are built.** The tasks and test cases come from the live index the search service
serves (serving.service.LiveIndex), so completions follow each catalog edit, publish or rollback
exactly when the results do: the first request that sees a new live index builds them (one
thread builds, others wait: 20 ms on the demo catalog, once per rebuild and process).

**When the popular searches are read: on a timer, not (only) with the index.** The index is
rebuilt when the catalog or the ranker's fit changes, which can be days apart, while clicks come
all day; reading them per request is out of the question (a scan of the click events joined to
the search log). So a request that finds them older than POPULAR_REFRESH_S starts ONE background
read and goes on with the previous ones; the next request after it finished rebuilds the
completions with them. The first read of a process is made at once (its first search waits for
the index anyway). A read that fails (database down) keeps the previous popular searches, logs,
and is tried again after the same interval; search never fails because of it.

**A crowd completion** needs COMPLETION_MIN_PEOPLE distinct verified people (never fewer than 3),
each of whose click is COMPLETION_SETTLE_S old when the read is made (search.completions: a voice
is a person; issue 42). The read also keeps the queries about to be offered (`CrowdRead.upcoming`)
for the admin's completions page.

**The exclusion list** (blocked suggestions and words, admin.completions) is read with the popular
searches, and on its own every EXCLUSIONS_REFRESH_S (two small tables): another worker stops
offering a blocked suggestion within that time. The worker that made the change reads it at once
(`LiveCompletions.refresh_exclusions`).

**Each keystroke's answer is kept** (`Built.answers`, COMPLETION_CACHE_SIZE per build): type-ahead
sends the same prefixes over and over, and a lookup (the typed words through the product's text
pipeline, a bisect per word, the suggestions' dicts) cost 32 µs of the ~540 µs the WSGI app spends
on a hot request; a hit costs 3.5 µs (docs/prefix-search.md, issue 43 item 6). The answers live
inside the build they were computed from, keyed by (query, visible roles): a new live index, a new
popular read or a changed exclusion list makes a new build with an empty cache, so an answer is
never served from an index, a read or an exclusion list that no longer serves, and one set of
roles never reads another's.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from analytics.store import AnalyticsStore
from lexicon import frequency
from lexicon.language import CATALOG_LANGUAGE
from search.completions import (NO_EXCLUSIONS, Completion, Completions, CrowdQuery, Exclusions, PopularSearch,
                                crowd_queries, popular_searches, still_answered, upcoming_searches)
from search.lru import LRU
from serving.service import LiveIndex

log = logging.getLogger(__name__)

#: How old the popular searches may get before a request starts a fresh read (the analytics
#: page's roll-up lags by as much: ANALYTICS_ROLLUP_INTERVAL_S's default).
POPULAR_REFRESH_S = 300.0
#: How old the exclusion list may get in a worker that did not make the change.
EXCLUSIONS_REFRESH_S = 30.0
#: Answers kept per build (query, visible roles): as many as the answer cache keeps answers
#: (ANSWER_CACHE_SIZE's default), since each completions answer rides on one of those; past it,
#: the search itself is a miss costing milliseconds, not the 32 µs a completions miss costs. An
#: answer of 5 suggestions takes ~3.7 KB (tracemalloc), so at most ~4 MB per worker.
COMPLETION_CACHE_SIZE = 1024


@dataclass(frozen=True)
class CrowdRead:
    """One read of the search log and the exclusion list."""

    popular: tuple[PopularSearch, ...] = ()
    upcoming: tuple[CrowdQuery, ...] = ()      # not offered yet: settling, or one person short
    exclusions: Exclusions = NO_EXCLUSIONS
    at: datetime | None = None                 # when it was read (None: never)


@dataclass(frozen=True)
class Offer:
    """The completions of one (query, visible roles) of one build: as found (with the tasks each
    leads to) and as the response lists them (shared between responses: read them only)."""

    found: tuple[Completion, ...]
    listed: tuple[dict, ...]


@dataclass(frozen=True)
class Built:
    """One build of the completions: the live index and the read generation (popular searches and
    exclusions) it was made from, and the answers given from it. Replaced whole, never mutated but
    for its LRU, so a cached answer can only come from the build a request is served."""

    live: LiveIndex
    generation: int
    completions: Completions
    answers: LRU[Offer]

    def offer(self, query: str, roles: frozenset[str], language: str = CATALOG_LANGUAGE) -> Offer:
        """The completions of `query` for `roles`, read in `language` (cached)."""
        key = (query, roles, language)
        offer = self.answers.get(key)
        if offer is None:
            found = tuple(self.completions.complete(query, roles, language=language))
            offer = Offer(found, tuple(c.as_dict() for c in found))
            self.answers.put(key, offer)
        return offer


def read_popular(store: AnalyticsStore, min_people: int, settle_s: float,
                 now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> CrowdRead:
    """The popular searches of the search log (search.completions.popular_searches: people whose
    click is `settle_s` old at `now`), minus those whose latest answer was "no confident match",
    the upcoming ones, and the exclusion list."""
    at = now()
    crowd = crowd_queries(store.clicked_searches(), at - timedelta(seconds=settle_s))
    popular = popular_searches(crowd, min_people)
    upcoming = upcoming_searches(crowd, min_people)
    unanswered = store.unanswered_queries([c.query for c in (*popular, *upcoming)])
    return CrowdRead(still_answered(popular, unanswered), tuple(c for c in upcoming if c.query not in unanswered),
                     store.completion_exclusions(), at)


class LiveCompletions:
    """The completions of the live index with the latest read of the popular searches and the
    exclusion list."""

    def __init__(self, read: Callable[[], CrowdRead], refresh_s: float = POPULAR_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic,
                 read_exclusions: Callable[[], Exclusions] | None = None,
                 exclusions_refresh_s: float = EXCLUSIONS_REFRESH_S, cache_size: int = COMPLETION_CACHE_SIZE):
        self.read, self.refresh_s, self.clock = read, refresh_s, clock
        self.cache_size = cache_size
        self.read_exclusions, self.exclusions_refresh_s = read_exclusions, exclusions_refresh_s
        self._crowd: CrowdRead | None = None     # None: never read
        self._exclusions: Exclusions = NO_EXCLUSIONS
        self._generation = 0           # moves with each successful read that changes something
        self._read_at = float("-inf")  # when the latest read (successful or not) started
        self._excluded_at = float("-inf")
        self._reading = False
        self._built: Built | None = None
        self._lock = threading.Lock()       # guards the fields above
        self._building = threading.Lock()   # one build at a time
        # the misspelling rule's word lists, loaded off the request path (lexicon.frequency.warm)
        threading.Thread(target=frequency.warm, name="taskfinder-word-frequencies", daemon=True).start()

    @property
    def crowd(self) -> CrowdRead:
        """The latest read (empty before the first)."""
        return self._crowd or CrowdRead()

    def complete(self, live: LiveIndex, query: str, roles: frozenset[str],
                 language: str = CATALOG_LANGUAGE) -> list[dict]:
        """The completions of `query` for a caller who may see `roles`, as the response lists them
        (a new list; its dicts are shared with other answers: read them only)."""
        return list(self.offer(live, query, roles, language).listed)

    def offer(self, live: LiveIndex, query: str, roles: frozenset[str], language: str = CATALOG_LANGUAGE) -> Offer:
        """The completions of `query` for `roles` from the build of `live` and the newest read,
        cached in that build (`found` carries the tasks each leads to). `language`: the language
        the search read `query` in (its answer's `language`): a suggestion written in neither the
        catalog's language nor that one comes after those that are
        (search.completions.CompletionView.lookup)."""
        return self._current(live).offer(query, frozenset(roles), language)

    def completions(self, live: LiveIndex) -> Completions:
        """The completions of `live` with the newest popular searches (built if need be)."""
        return self._current(live).completions

    def _current(self, live: LiveIndex) -> Built:
        """The build of `live` with the newest read, made (with an empty answer cache) when the
        index or the read generation moved: the only place a build is made or replaced."""
        self._refresh_when_due()
        built = self._built
        if built is not None and built.live is live and built.generation == self._generation:
            return built
        with self._building:
            with self._lock:
                built, generation = self._built, self._generation
                popular, exclusions = self.crowd.popular, self._exclusions
            if built is not None and built.live is live and built.generation == generation:
                return built
            built = Built(live, generation, Completions(live.index.tasks, live.cases, popular, exclusions=exclusions),
                          LRU(self.cache_size))
            self._built = built
            return built

    def refresh_popular(self) -> None:
        """Read the popular searches and exclusions now (the background read; also tests, the
        first search and the admin's completions page)."""
        with self._lock:
            self._read_at = self._excluded_at = self.clock()
        try:
            crowd = self.read()
        except Exception:   # the previous ones keep serving; tried again after refresh_s
            log.exception("reading the popular searches for completions failed")
            return
        finally:
            with self._lock:
                self._reading = False
        with self._lock:
            self._crowd = crowd
            self._exclusions = crowd.exclusions
            self._generation += 1

    def refresh_exclusions(self) -> None:
        """Read the exclusion list now (the background read between popular reads; at once in the
        worker whose admin changed it); the completions are rebuilt when it changed."""
        with self._lock:
            self._excluded_at = self.clock()
        try:
            exclusions = self.read_exclusions() if self.read_exclusions is not None else self.read().exclusions
        except Exception:
            log.exception("reading the completions' exclusion list failed")
            return
        finally:
            with self._lock:
                self._reading = False
        with self._lock:
            if exclusions != self._exclusions:
                self._exclusions = exclusions
                self._generation += 1

    def _refresh_when_due(self) -> None:
        """Start the background read when the popular searches are older than refresh_s, or the
        exclusions older than exclusions_refresh_s (the process's very first read in this thread,
        at once)."""
        with self._lock:
            if self._reading:
                return
            now = self.clock()
            popular_due = now - self._read_at >= self.refresh_s
            exclusions_due = self.read_exclusions is not None and now - self._excluded_at >= self.exclusions_refresh_s
            if not (popular_due or exclusions_due):
                return
            self._reading = True
            first = self._read_at == float("-inf")
        if first:
            self.refresh_popular()
        else:
            target = self.refresh_popular if popular_due else self.refresh_exclusions
            threading.Thread(target=target, name="completions-popular", daemon=True).start()

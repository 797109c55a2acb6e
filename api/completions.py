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
from search.completions import (NO_EXCLUSIONS, Completions, CrowdQuery, Exclusions, PopularSearch, crowd_queries,
                                popular_searches, still_answered, upcoming_searches)
from serving.service import LiveIndex

log = logging.getLogger(__name__)

#: How old the popular searches may get before a request starts a fresh read (the analytics
#: page's roll-up lags by as much: ANALYTICS_ROLLUP_INTERVAL_S's default).
POPULAR_REFRESH_S = 300.0
#: How old the exclusion list may get in a worker that did not make the change.
EXCLUSIONS_REFRESH_S = 30.0


@dataclass(frozen=True)
class CrowdRead:
    """One read of the search log and the exclusion list."""

    popular: tuple[PopularSearch, ...] = ()
    upcoming: tuple[CrowdQuery, ...] = ()      # not offered yet: settling, or one person short
    exclusions: Exclusions = NO_EXCLUSIONS
    at: datetime | None = None                 # when it was read (None: never)


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
                 exclusions_refresh_s: float = EXCLUSIONS_REFRESH_S):
        self.read, self.refresh_s, self.clock = read, refresh_s, clock
        self.read_exclusions, self.exclusions_refresh_s = read_exclusions, exclusions_refresh_s
        self._crowd: CrowdRead | None = None     # None: never read
        self._exclusions: Exclusions = NO_EXCLUSIONS
        self._generation = 0           # moves with each successful read that changes something
        self._read_at = float("-inf")  # when the latest read (successful or not) started
        self._excluded_at = float("-inf")
        self._reading = False
        self._built: tuple[LiveIndex, int, Completions] | None = None
        self._lock = threading.Lock()       # guards the fields above
        self._building = threading.Lock()   # one build at a time
        # the misspelling rule's word lists, loaded off the request path (lexicon.frequency.warm)
        threading.Thread(target=frequency.warm, name="taskfinder-word-frequencies", daemon=True).start()

    @property
    def crowd(self) -> CrowdRead:
        """The latest read (empty before the first)."""
        return self._crowd or CrowdRead()

    def complete(self, live: LiveIndex, query: str, roles: frozenset[str]) -> list[dict]:
        """The completions of `query` for a caller who may see `roles`, as the response lists them."""
        return [c.as_dict() for c in self.completions(live).complete(query, roles)]

    def completions(self, live: LiveIndex) -> Completions:
        """The completions of `live` with the newest popular searches (built if need be)."""
        self._refresh_when_due()
        built = self._built
        if built is not None and built[0] is live and built[1] == self._generation:
            return built[2]
        with self._building:
            with self._lock:
                built, generation = self._built, self._generation
                popular, exclusions = self.crowd.popular, self._exclusions
            if built is not None and built[0] is live and built[1] == generation:
                return built[2]
            completions = Completions(live.index.tasks, live.cases, popular, exclusions=exclusions)
            self._built = (live, generation, completions)
            return completions

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

"""The I/O edge of query completions (search.completions): which `Completions` serve the live
index, and the popular searches read from the analytics store. /api/search adds them to every
answer (api.search).

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
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Sequence

from analytics.store import AnalyticsStore
from search.completions import Completions, PopularSearch, popular_searches, still_answered
from serving.service import LiveIndex

log = logging.getLogger(__name__)

#: How old the popular searches may get before a request starts a fresh read (the analytics
#: page's roll-up lags by as much: ANALYTICS_ROLLUP_INTERVAL_S's default).
POPULAR_REFRESH_S = 300.0


def read_popular(store: AnalyticsStore, min_sessions: int) -> tuple[PopularSearch, ...]:
    """The popular searches of the search log (search.completions.popular_searches), minus those
    whose latest answer was "no confident match"."""
    popular = popular_searches(store.clicked_searches(), min_sessions)
    return still_answered(popular, store.unanswered_queries([p.query for p in popular]))


class LiveCompletions:
    """The completions of the live index with the latest read of the popular searches."""

    def __init__(self, read: Callable[[], Sequence[PopularSearch]], refresh_s: float = POPULAR_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic):
        self.read, self.refresh_s, self.clock = read, refresh_s, clock
        self._popular: tuple[PopularSearch, ...] | None = None   # None: never read
        self._generation = 0           # moves with each successful read
        self._read_at = float("-inf")  # when the latest read (successful or not) started
        self._reading = False
        self._built: tuple[LiveIndex, int, Completions] | None = None
        self._lock = threading.Lock()       # guards the fields above
        self._building = threading.Lock()   # one build at a time

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
            built, generation, popular = self._built, self._generation, self._popular or ()
            if built is not None and built[0] is live and built[1] == generation:
                return built[2]
            completions = Completions(live.index.tasks, live.cases, popular)
            self._built = (live, generation, completions)
            return completions

    def refresh_popular(self) -> None:
        """Read the popular searches now (the background read; also tests and the first search)."""
        with self._lock:
            self._read_at = self.clock()
        try:
            popular = tuple(self.read())
        except Exception:   # the previous ones keep serving; tried again after refresh_s
            log.exception("reading the popular searches for completions failed")
            return
        finally:
            with self._lock:
                self._reading = False
        with self._lock:
            self._popular = popular
            self._generation += 1

    def _refresh_when_due(self) -> None:
        """Start the background read when the popular searches are older than refresh_s (the
        process's very first one in this thread, at once)."""
        with self._lock:
            if self._reading or self.clock() - self._read_at < self.refresh_s:
                return
            self._reading = True
            first = self._read_at == float("-inf")
        if first:
            self.refresh_popular()
        else:
            threading.Thread(target=self.refresh_popular, name="completions-popular", daemon=True).start()

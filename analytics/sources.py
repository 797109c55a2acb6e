"""One address, many sessions: a cap on how many distinct sessions one client address may vote
with, held in memory only (the address is never stored; issue 16 item 3).

Session ids are the widget's own (random per tab), so one bot can make as many as it likes, and
the distinct-session threshold of learning (LEARNING_MIN_SESSIONS) alone would not stop it. The
events endpoint asks `admit(address, session)`: an address may bring at most
LEARNING_SESSIONS_PER_ADDRESS distinct sessions per window (an hour); the events of any further
session are stored without their session id, which binds them to no search
(analytics.formulas.bound_to_search): neither a measure nor learning counts them.

The table lives in this process's memory (per gunicorn worker: a bot reaching N workers gets N
times the cap; documented), keyed by the address as the rate limiter sees it
(guard.limits.request_client), forgotten when the window turns; at most MAX_ADDRESSES addresses
are tracked (past that, the window is cleared early: the cap errs towards counting).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

MAX_ADDRESSES = 100_000
WINDOW_S = 3600.0


class AddressSessions:
    def __init__(self, limit: int, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._window_start = clock()
        self._sessions: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def admit(self, address: str | None, session_id: str | None) -> bool:
        """Whether `session_id`'s events from `address` may bind to their searches."""
        if not address or not session_id:
            return True
        with self._lock:
            now = self.clock()
            if now - self._window_start >= self.window_s or len(self._sessions) >= MAX_ADDRESSES:
                self._sessions.clear()
                self._window_start = now
            seen = self._sessions.setdefault(address, set())
            if session_id in seen:
                return True
            if len(seen) >= self.limit:
                return False
            seen.add(session_id)
            return True

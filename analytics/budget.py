"""Flood caps of POST /api/events (issue 17 item 6): 300 posts of 14 KB in a second were all
accepted; at the per-address rate limit that was ~15 GB a day, kept 90 days.

Per process, in fixed one-minute windows: at most ANALYTICS_SESSION_EVENTS_PER_MINUTE events
from one session id and ANALYTICS_EVENTS_PER_MINUTE from everyone. A request over either cap is
refused whole (429 with Retry-After: the end of the window) and nothing of it is stored. So the
events table grows by at most ANALYTICS_EVENTS_PER_MINUTE x 1,440 x workers rows a day, whoever
sends them; the per-address rate limit (guard/) still applies before this.

Impressions are stored compactly: one per search id per window (the widget sends one when it
shows the results; a repeat says nothing new), each with its task ids once, in order.

Why in-process and not in Redis like the rate limits: this is a bound on what one process
writes, so a per-process count is exactly the quantity bounded (and needs no round trip on the
events path); the memory is one counter per session seen in the current minute, at most the
global cap's worth, cleared every minute.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from typing import Callable, Sequence

from analytics.records import EventRecord

WINDOW_S = 60.0


class EventBudget:
    def __init__(self, per_session: int, total: int, clock: Callable[[], float] = time.monotonic,
                 window_s: float = WINDOW_S):
        self.per_session = per_session
        self.total = total
        self.clock = clock
        self.window_s = window_s
        self._lock = threading.Lock()
        self._window: int | None = None
        self._used = 0
        self._sessions: dict[str, int] = {}
        self._impressions: set[str] = set()

    def _roll(self, now: float) -> None:
        window = int(now // self.window_s)
        if window != self._window:
            self._window, self._used = window, 0
            self._sessions.clear()
            self._impressions.clear()

    def admit(self, session_id: str | None, events: Sequence[EventRecord]) -> tuple[list[EventRecord], int | None]:
        """(the events to store, None), or ([], seconds to wait) when the request is over a cap.
        Repeated impressions of one search id are left out of what is stored (compact_impressions)."""
        with self._lock:
            now = self.clock()
            self._roll(now)
            retry_after = max(1, math.ceil((self._window + 1) * self.window_s - now))
            n = len(events)
            if self._used + n > self.total:
                return [], retry_after
            if session_id is not None and self._sessions.get(session_id, 0) + n > self.per_session:
                return [], retry_after
            self._used += n
            if session_id is not None:
                self._sessions[session_id] = self._sessions.get(session_id, 0) + n
            return compact_impressions(events, self._impressions), None


def compact_impressions(events: Sequence[EventRecord], seen: set[str]) -> list[EventRecord]:
    """`events` without impressions of a search id already in `seen` (which gains the new ones),
    and each impression's task ids without repeats, in order."""
    kept = []
    for event in events:
        if event.type == "impression":
            if event.search_id in seen:
                continue
            seen.add(event.search_id)
            if event.task_ids is not None:
                event = replace(event, task_ids=tuple(dict.fromkeys(event.task_ids)))
        kept.append(event)
    return kept

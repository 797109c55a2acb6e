"""A consecutive-failure circuit breaker, so a dead LLM endpoint costs one timeout, not one per query.

closed     calls pass; `failures` consecutive failures open the circuit
open       calls are refused until `cooldown_s` has passed since the circuit opened
half-open  after the cooldown exactly one trial call passes; success closes the circuit,
           failure re-opens it for another cooldown

Only transport failures (timeout, connection, HTTP status) count. An answer that arrived but
was unusable proves the endpoint is up, so it counts as a success here; its quality problem is
reported per query as `rerank_invalid` instead. Thread-safe: the API serves queries from
several threads against one breaker.

`on_change` (optional) hears every state change as the breaker observes it, for a metrics
gauge: "half_open" is a matter of elapsed time, so it is reported by the first call that finds
the cooldown over, not at the instant it ends.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


class CircuitBreaker:
    def __init__(self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[str], None] | None = None):
        """`on_change` runs under the breaker's lock, so that changes are reported in the order
        they happen: it must be quick and must not call back into the breaker (a gauge update)."""
        self._threshold = failures
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False
        self._on_change = on_change
        self._reported: str | None = None
        with self._lock:
            self._state()  # report the initial state, so a gauge has a value before the first call

    @property
    def state(self) -> str:
        with self._lock:
            return self._state()

    def _state(self) -> str:
        """The current state (caller holds the lock), reported to `on_change` when it moved."""
        if self._opened_at is None:
            state = CLOSED
        elif self._clock() - self._opened_at < self._cooldown_s:
            state = OPEN
        else:
            state = HALF_OPEN
        if self._on_change is not None and state != self._reported:
            self._reported = state
            self._on_change(state)
        return state

    def allow(self) -> bool:
        """Whether a call may go out now; in half-open state this claims the single trial."""
        with self._lock:
            state = self._state()
            if state == CLOSED:
                return True
            if state == HALF_OPEN and not self._trial_in_flight:
                self._trial_in_flight = True
                return True
            return False

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial_in_flight = False
            self._state()

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._trial_in_flight or self._failures >= self._threshold:
                self._opened_at = self._clock()
            self._trial_in_flight = False
            self._state()

"""Login throttling: after a few failed logins for one (user name, client address), further
attempts are refused for a lockout window, whether or not the password is then right.

Keyed on name *and* address so that a guesser cannot lock a colleague out from elsewhere, and a
user who mistypes cannot lock everyone out. `LoginThrottle` is the interface the login view
uses; `MemoryThrottle` keeps counts in this process (enough for one waitress process; a shared
store such as Redis or the database can implement the same three methods for several).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol


class LoginThrottle(Protocol):
    def locked_for(self, key: str) -> float:
        """Seconds until `key` may try again (0: it may try now)."""

    def failed(self, key: str) -> None:
        """Count a failed attempt for `key`."""

    def succeeded(self, key: str) -> None:
        """Forget `key`'s failures."""


def throttle_key(name: str, address: str | None) -> str:
    return f"{(name or '').strip().lower()[:64]}|{address or '-'}"


@dataclass
class _Failures:
    count: int
    first_at: float
    locked_until: float = 0.0


class MemoryThrottle:
    """`max_failures` failures within `window_s` lock the key for `window_s` seconds.

    Bounded memory: at most `max_keys` keys are tracked; stale ones are pruned first, then the
    oldest (which can only make throttling more lenient for the dropped key, never stricter)."""

    def __init__(self, max_failures: int, window_s: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 10_000):
        self.max_failures = max_failures
        self.window_s = window_s
        self.clock = clock
        self.max_keys = max_keys
        self._failures: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    def locked_for(self, key: str) -> float:
        with self._lock:
            entry = self._failures.get(key)
            return max(0.0, entry.locked_until - self.clock()) if entry else 0.0

    def failed(self, key: str) -> None:
        now = self.clock()
        with self._lock:
            entry = self._failures.get(key)
            if entry is None or now - entry.first_at > self.window_s and entry.locked_until <= now:
                self._prune(now)
                entry = self._failures[key] = _Failures(0, now)
            entry.count += 1
            if entry.count >= self.max_failures:
                entry.locked_until = now + self.window_s

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def _prune(self, now: float) -> None:
        if len(self._failures) < self.max_keys:
            return
        for key in [k for k, e in self._failures.items() if now - e.first_at > self.window_s and e.locked_until <= now]:
            del self._failures[key]
        while len(self._failures) >= self.max_keys:
            del self._failures[next(iter(self._failures))]

"""Login throttling: after a few failed logins for one (user name, client address), further
attempts are refused for a lockout window, whether or not the password is then right.

Keyed on name *and* address so that a guesser cannot lock a colleague out from elsewhere, and a
user who mistypes cannot lock everyone out. `LoginThrottle` is the interface the login view
uses. `MemoryThrottle` keeps counts in this process (the embedded default: one waitress
process). `RedisThrottle` keeps them in Redis (REDIS_URL), so every gunicorn worker and every
host sees the same failures; `build_throttle` picks one from the settings.

When Redis cannot be asked, RedisThrottle lets this process's MemoryThrottle decide: logins
stay throttled, per worker (a guesser then gets at most WEB_CONCURRENCY x LOGIN_MAX_FAILURES
tries per lockout window and host instead of LOGIN_MAX_FAILURES), never unthrottled and never
refused outright; the outage is logged once and counted in
taskfinder_ratelimit_backend_errors_total.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from infra.ratelimit import BackendUnavailable, OutageReporter, RedisStore


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


# KEYS[1]: failures counter, KEYS[2]: lock; ARGV[1]: window ms, ARGV[2]: max failures.
_FAILED = """
local count = redis.call('INCR', KEYS[1])
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
if count >= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
  redis.call('DEL', KEYS[1])
end
return count
"""
FALLBACK = "logins are throttled per worker (in-process counts)"


class RedisThrottle:
    """MemoryThrottle's rule with the counts in Redis: `max_failures` failures of a key within
    `window_s` lock it for `window_s`, whichever worker or host saw them (one Lua script per
    failure, atomic). `fallback` decides while Redis cannot be asked (see the module docstring)."""

    def __init__(self, store: RedisStore, max_failures: int, window_s: float, fallback: MemoryThrottle,
                 outage: OutageReporter | None = None):
        self.store = store
        self.max_failures = max_failures
        self.window_ms = max(1, int(window_s * 1000))
        self.fallback = fallback
        self.outage = outage or OutageReporter("redis (login throttle)")
        self._failed = store.script(_FAILED)

    def _keys(self, key: str) -> list[str]:
        return [self.store.key("login", "failures", key), self.store.key("login", "lock", key)]

    def _shared(self, operation, fallback):
        try:
            result = self.store.call(operation)
        except BackendUnavailable as exc:
            self.outage.failed(exc, FALLBACK)
            return fallback()
        self.outage.succeeded()
        return result

    def locked_for(self, key: str) -> float:
        ttl = self._shared(lambda: self.store.client.pttl(self._keys(key)[1]), lambda: self.fallback.locked_for(key) * 1000)
        return max(0.0, float(ttl) / 1000)

    def failed(self, key: str) -> None:
        self._shared(lambda: self._failed(keys=self._keys(key), args=[self.window_ms, self.max_failures]),
                     lambda: self.fallback.failed(key))

    def succeeded(self, key: str) -> None:
        self.fallback.succeeded(key)
        self._shared(lambda: self.store.client.delete(*self._keys(key)), lambda: None)


def build_throttle(settings, store: RedisStore | None, outage: OutageReporter | None = None) -> LoginThrottle:
    """RedisThrottle when the app has a Redis store (REDIS_URL), MemoryThrottle otherwise."""
    memory = MemoryThrottle(settings.login_max_failures, settings.login_lockout_s)
    if store is None:
        return memory
    return RedisThrottle(store, settings.login_max_failures, settings.login_lockout_s, memory, outage)

"""Fixed-window counters, in Redis (shared by every worker and host) or in this process.

A `Rate` is "at most `limit` hits per `window_s` seconds". A `Window` counts hits per key:

    decision = window.hit("search:203.0.113.7", Rate(120, 60))
    decision.allowed, decision.retry_after_s

The window of a key opens at its first hit and lasts `window_s`; the hit that would exceed the
limit is refused (and not counted) with the time left until the window closes, which is exactly
when a hit will pass again (the Retry-After header). A client can get at most 2 x limit through
in any `window_s` span (a full window just before another one opens), which is what a fixed
window costs in exchange for one small counter per key and an exact Retry-After.

`RedisWindow` does the whole check in one Lua script (one round trip, atomic however many
workers and hosts share the Redis): INCR, PEXPIRE on the first hit, PTTL, and a DECR of a refused
hit so that refusals do not prolong the window. Redis's own clock times every window, so hosts
with skewed clocks agree. `MemoryWindow` is the same in one process (the embedded default,
where one waitress process is all there is).

`RedisStore` (a client, a key prefix, a circuit breaker) is also what the admin login
throttle keeps its shared counters in (admin.throttle.RedisThrottle).

Redis failures raise `BackendUnavailable` (the caller decides: fail open for the search API, fall
back to a per-process window for login); a circuit breaker stops calling a Redis that keeps
failing, so an outage costs one connect timeout per cooldown, not one per request.
"""
from __future__ import annotations

import logging
import math
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

from infra.breaker import CircuitBreaker

log = logging.getLogger(__name__)

#: After this many consecutive Redis errors, decide without Redis for REDIS_COOLDOWN_S.
REDIS_FAILURES, REDIS_COOLDOWN_S = 3, 5.0
#: Redis calls must not hold a request up: on loopback or a LAN a call takes well under 1 ms.
REDIS_TIMEOUT_S = 0.25
UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
         "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*(?:/|per)\s*(\d+)?\s*([a-z]+?)s?\s*$")


class BackendUnavailable(RuntimeError):
    """The shared counter store (Redis) could not be asked."""


@dataclass(frozen=True)
class Rate:
    limit: int
    window_s: int

    def __str__(self) -> str:
        return f"{self.limit}/{self.window_s}s"


def parse_rate(text: str) -> Rate | None:
    """`"120/minute"`, `"10/30s"`, `"1000 per hour"` -> Rate; `"off"`, `"0"` -> None (no limit).
    ValueError with the accepted forms on anything else."""
    cleaned = text.strip().lower()
    if cleaned in ("off", "0", "none", "unlimited"):
        return None
    match = _RATE.match(cleaned)
    if not match or match.group(3) not in UNITS or int(match.group(1)) < 1:
        raise ValueError(f"{text!r}: expected COUNT/UNIT (e.g. 120/minute, 10/30s, 1000/hour) or off")
    window = int(match.group(2) or 1) * UNITS[match.group(3)]
    if window < 1:
        raise ValueError(f"{text!r}: the window must be at least one second")
    return Rate(int(match.group(1)), window)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after_s: int   # 0 when allowed; whole seconds, rounded up, at least 1 otherwise


def decide(count: int, ttl_ms: int, rate: Rate) -> Decision:
    """The decision for a hit that made the key's count `count`, its window closing in `ttl_ms`."""
    if count <= rate.limit:
        return Decision(True, rate.limit - count, 0)
    return Decision(False, 0, max(1, math.ceil(ttl_ms / 1000)))


# KEYS[1]: the counter; ARGV[1]: window in ms; ARGV[2]: limit. Returns {count, ttl_ms}.
_HIT = """
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
if count > tonumber(ARGV[2]) then
  redis.call('DECR', KEYS[1])
end
return {count, ttl}
"""

def connect_redis(url: str):
    """A redis-py client for REDIS_URL with short timeouts (a slow Redis must not stall requests)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)


class RedisStore:
    """One Redis client with a key prefix and a circuit breaker; every call that fails or is
    skipped by the open breaker raises BackendUnavailable."""

    def __init__(self, client, prefix: str, breaker: CircuitBreaker | None = None):
        import redis

        self.client = client
        self.prefix = prefix
        self.breaker = breaker or CircuitBreaker(REDIS_FAILURES, REDIS_COOLDOWN_S)
        self._errors = (redis.RedisError, OSError)

    def script(self, source: str):
        """A Lua script, called as `store.call(lambda: script(keys=[...], args=[...]))` (EVALSHA,
        loaded again by redis-py after a Redis restart)."""
        return self.client.register_script(source)

    def call(self, operation: Callable[[], object]) -> object:
        if not self.breaker.allow():
            raise BackendUnavailable("redis: circuit open after repeated errors")
        try:
            result = operation()
        except self._errors as exc:
            self.breaker.record_failure()
            raise BackendUnavailable(f"redis: {type(exc).__name__}: {exc}") from exc
        self.breaker.record_success()
        return result

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)


class RedisWindow:
    """Fixed windows in Redis, shared by every process that uses the same Redis and prefix."""

    def __init__(self, store: RedisStore):
        self.store = store
        self._hit = store.script(_HIT)

    def hit(self, key: str, rate: Rate) -> Decision:
        redis_key = self.store.key("rl", key)
        count, ttl = self.store.call(lambda: self._hit(keys=[redis_key], args=[rate.window_s * 1000, rate.limit]))
        return decide(int(count), int(ttl), rate)


class MemoryWindow:
    """Fixed windows in this process (bounded: expired keys are dropped as new ones arrive)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000):
        self.clock = clock
        self.max_keys = max_keys
        self._windows: dict[str, tuple[int, float]] = {}   # key -> (count, window end)
        self._lock = threading.Lock()

    def hit(self, key: str, rate: Rate) -> Decision:
        now = self.clock()
        with self._lock:
            count, ends = self._windows.get(key, (0, 0.0))
            if ends <= now:
                self._prune(now)
                count, ends = 0, now + rate.window_s
            count += 1
            if count <= rate.limit:
                self._windows[key] = (count, ends)
        return decide(count, int((ends - now) * 1000), rate)

    def _prune(self, now: float) -> None:
        if len(self._windows) < self.max_keys:
            return
        for key in [k for k, (_, ends) in self._windows.items() if ends <= now]:
            del self._windows[key]
        while len(self._windows) >= self.max_keys:  # only ever more lenient for the dropped key
            del self._windows[next(iter(self._windows))]


class OutageReporter:
    """Tells operators about a counter store that cannot be asked, without flooding the log:
    the first failure of an outage is logged (warning) and its end (info); every decision taken
    without the store is counted through `count` (a metrics counter's inc)."""

    def __init__(self, what: str, count: Callable[[], None] = lambda: None):
        self.what = what
        self.count = count
        self._down = False
        self._lock = threading.Lock()

    def failed(self, error: Exception, consequence: str) -> None:
        self.count()
        with self._lock:
            first, self._down = not self._down, True
        if first:
            log.warning("%s unavailable (%s); until it is back: %s", self.what, error, consequence)

    def succeeded(self) -> None:
        if self._down:
            with self._lock:
                was_down, self._down = self._down, False
            if was_down:
                log.info("%s is back", self.what)

"""Per-client rate limits (moving windows of the `limits` library), answered with 429 JSON and Retry-After.

    limit    paths                                methods   setting             when Redis is down
    search   /api/search, /api/kb/search          any       RATE_LIMIT_SEARCH   fail open
    events   /api/events (and below)              any       RATE_LIMIT_EVENTS   fail open
    login    /admin/login                         POST      RATE_LIMIT_LOGIN    per-process window

Each rule is one moving window per client, shared by its paths (the search API and the
knowledge base draw on one budget) and matched on the request path, not on a view, so a route
added later under a limited path (the events API) is limited from its first request; it is
checked before anything else the app does for a request (install_rate_limits). The client is
`web.clients.client_address`: the TCP peer, or behind TRUSTED_PROXIES the first untrusted hop
of X-Forwarded-For, grouped by `infra.addresses.client_key` (an IPv6 /64 is one client: one host
picks any of its 2^64 addresses, issue 42 item 4; an IPv4-mapped address is its IPv4). The strategy is the moving window: at most `limit` requests in any
`window_s` span (a fixed window lets twice that through across a window boundary), and
Retry-After is exactly when the oldest counted request leaves the window. With REDIS_URL every
worker and host shares one count per client and limit (the `limits` library keeps the
windows in Redis, one Lua script per hit); without it each process counts alone (the
embedded default, one process). RATE_LIMITS=0, or a limit set to `off`, switches limiting off.

When Redis cannot be asked, the public search and events APIs answer unlimited rather than not
at all (fail open: a homepage search box must keep working), and the login form and the login
throttle (admin.throttle) fall back to per-process windows (a password guesser must never go
unlimited). That is `ResilientStorage`, a `limits` storage around Redis with a circuit breaker
(an outage costs one connect timeout per cooldown, not one per request). Either way the outage
is logged once and each such decision counted in taskfinder_ratelimit_backend_errors_total.
(Flask-Limiter's fallback, in_memory_fallback, switched every limit at once, so it could not
keep the search open and the login counted; Flask-Limiter itself is gone: install_rate_limits.)

Cost (ops/bench_ratelimit.py, side by side with the old hand-written fixed window on a loaded
2-core machine): in-process about +170 µs per limited request against +25 µs before; with Redis
the round trip dominates and is the same (one EVALSHA). Figures: docs/design/abuse-and-faults.md.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from flask import Flask, Response, jsonify, request
from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage, MovingWindowSupport, RedisStorage, Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from infra.addresses import client_key
from infra.breaker import CircuitBreaker
from web.clients import client_address
from settings import Rate

log = logging.getLogger(__name__)

#: After this many consecutive Redis errors, decide without Redis for REDIS_COOLDOWN_S.
REDIS_FAILURES, REDIS_COOLDOWN_S = 3, 5.0
#: Redis calls must not hold a request up: on loopback or a LAN a call takes well under 1 ms.
REDIS_TIMEOUT_S = 0.25
#: Limits (scopes) counted in this process while Redis is down; every other one fails open.
#: The events_* scopes are the flood caps of POST /api/events (analytics.budget): they bound
#: rows written to the database, so an outage must not lift them.
LOCAL_SCOPES = frozenset({"login", "login_lockout", "login_account",
                          "events_session", "events_address", "events_network", "events_everyone"})
OPEN, LOCAL = "open", "local"
SCHEME = "taskfinder+"   # ResilientStorage's URI: this prefix before the Redis URL


@dataclass(frozen=True)
class Rule:
    name: str                          # the `limit` label of the metrics; the limit's scope
    paths: tuple[str, ...]
    methods: frozenset[str] | None     # None: every method
    rate: Rate

    def matches(self, path: str, method: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return any(path == p or path.startswith(p + "/") for p in self.paths)

    @property
    def on_outage(self) -> str:
        return LOCAL if self.name in LOCAL_SCOPES else OPEN


def rules_from(settings) -> tuple[Rule, ...]:
    """The limits in force: every configured one, none when RATE_LIMITS=0."""
    if not settings.rate_limits:
        return ()
    candidates = (
        ("search", ("/api/search", "/api/kb/search"), None, settings.rate_limit_search),
        ("events", ("/api/events",), None, settings.rate_limit_events),
        ("login", ("/admin/login",), frozenset({"POST"}), settings.rate_limit_login),
    )
    return tuple(Rule(name, paths, methods, rate) for name, paths, methods, rate in candidates if rate is not None)


def request_client(settings) -> str:
    """The client of the current request (see web.clients.client_address)."""
    return client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), settings.trusted_proxies)


class OutageReporter:
    """Tells operators about a counter store that cannot be asked, without flooding the log:
    the first failure of an outage is logged (warning) and its end (info); every decision taken
    without the store is counted through `count` (a metrics counter's inc)."""

    def __init__(self, what: str, count: Callable[[], None] = lambda: None):
        self.what = what
        self.count = count
        self._down = False
        self._lock = threading.Lock()

    def failed(self, error: object, consequence: str) -> None:
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


def scope_of(key: str) -> str:
    """The scope of a `limits` key. `RateLimitItem.key_for(*identifiers)` writes
    NAMESPACE/identifier.../amount/multiples/GRANULARITY and every caller here passes the
    scope last (install_rate_limits: client, scope; admin.throttle: subject, scope), so it is the
    fourth part from the right, whatever "/" a user name holds."""
    parts = key.rsplit("/", 4)
    return parts[1] if len(parts) == 5 else ""


class ResilientStorage(Storage, MovingWindowSupport):
    """A `limits` moving-window storage in Redis (`RedisStorage`, the windows shared by every
    worker and host) that never raises: when Redis fails, or its circuit breaker is open, a key
    of LOCAL_SCOPES is counted in this process's MemoryStorage and any other key is allowed
    (fail open). Built by URI, `taskfinder+redis://host:6379/0` (limits' storage_from_string)."""

    STORAGE_SCHEME = [SCHEME + scheme for scheme in ("redis", "rediss", "redis+unix")]

    def __init__(self, uri: str, wrap_exceptions: bool = False, *, breaker: CircuitBreaker | None = None,
                 outage: OutageReporter | None = None, key_prefix: str = "", **options) -> None:
        super().__init__(uri, wrap_exceptions=False)
        self.redis = RedisStorage(uri.removeprefix(SCHEME), key_prefix=key_prefix + "limits",
                                  socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S, **options)
        self.local = MemoryStorage()
        self.breaker = breaker or CircuitBreaker(REDIS_FAILURES, REDIS_COOLDOWN_S)
        self.outage = outage or OutageReporter("redis (rate limits, login throttle)")
        self._errors = (*_as_tuple(self.redis.base_exceptions), OSError)

    @property
    def base_exceptions(self) -> tuple[type[Exception], ...]:
        return self._errors

    def _decide(self, key: str, shared: Callable[[], object], local: Callable[[], object], open_value: object):
        error: object = "circuit open after repeated errors"
        if self.breaker.allow():
            try:
                result = shared()
            except self._errors as exc:
                self.breaker.record_failure()
                error = f"{type(exc).__name__}: {exc}"
            else:
                self.breaker.record_success()
                self.outage.succeeded()
                return result
        scope = scope_of(key)
        if scope in LOCAL_SCOPES:
            self.outage.failed(error, f"the {scope} limit is counted per worker (in-process counts)")
            return local()
        self.outage.failed(error, f"the {scope or 'public'} API is not rate-limited (fail open)")
        return open_value

    # -- the moving window (all that MovingWindowRateLimiter uses) ---------------------------
    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self._decide(key, lambda: self.redis.acquire_entry(key, limit, expiry, amount),
                            lambda: self.local.acquire_entry(key, limit, expiry, amount), True)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        return self._decide(key, lambda: self.redis.get_moving_window(key, limit, expiry),
                            lambda: self.local.get_moving_window(key, limit, expiry), (time.time(), 0))

    def clear(self, key: str) -> None:
        self.local.clear(key)
        self._decide(key, lambda: self.redis.clear(key), lambda: None, None)

    # -- the rest of the Storage interface --------------------------------------------------
    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return self._decide(key, lambda: self.redis.incr(key, expiry, amount),
                            lambda: self.local.incr(key, expiry, amount), 0)

    def get(self, key: str) -> int:
        return self._decide(key, lambda: self.redis.get(key), lambda: self.local.get(key), 0)

    def get_expiry(self, key: str) -> float:
        return self._decide(key, lambda: self.redis.get_expiry(key), lambda: self.local.get_expiry(key), time.time())

    def check(self) -> bool:
        return bool(self._decide("", self.redis.check, lambda: False, False))

    def reset(self) -> int | None:
        self.local.reset()
        return self.redis.reset()


def _as_tuple(exceptions) -> tuple[type[Exception], ...]:
    return exceptions if isinstance(exceptions, tuple) else (exceptions,)


def storage_uri(settings) -> str:
    """Where the windows live: ResilientStorage over REDIS_URL, or this process's memory."""
    return SCHEME + settings.redis_url if settings.redis_url else "memory://"


def build_storage(settings, breaker: CircuitBreaker, outage: OutageReporter) -> Storage:
    """A storage for code that uses `limits` directly (admin.throttle)."""
    return storage_from_string(storage_uri(settings), **storage_options(settings, breaker, outage))


def storage_options(settings, breaker: CircuitBreaker, outage: OutageReporter) -> dict:
    if not settings.redis_url:
        return {}
    return {"breaker": breaker, "outage": outage, "key_prefix": settings.redis_key_prefix}


def too_many_requests(rule: Rule, retry_after_s: int) -> Response:
    """429 with a message a person can act on and Retry-After in whole seconds."""
    response = jsonify({"error": f"too many requests: this client may make {rule.rate.limit} {rule.name} requests "
                                 f"per {rule.rate.window_s} s; retry in {retry_after_s} s",
                        "retry_after_s": retry_after_s})
    response.status_code = 429
    response.headers["Retry-After"] = str(retry_after_s)
    return response


class RefusedUntil:
    """Per (rule, client), when a refused client's window frees its oldest slot: until then every
    request of that client is refused anyway (a moving window full at time t frees nothing before
    its reset time; a refused hit is not counted), so it is refused from this memory without asking
    the storage again. With Redis a refusal costs two round trips (hit, then the window's reset
    time for Retry-After): a flooding client pays them once per window and worker, not per request.
    Bounded: past MAX entries the oldest half is dropped (a dropped client is asked about again)."""

    MAX = 10_000

    def __init__(self) -> None:
        self._until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str], now: float) -> float | None:
        until = self._until.get(key)
        if until is None or until <= now:
            return None
        return until

    def put(self, key: tuple[str, str], until: float) -> None:
        with self._lock:
            if len(self._until) >= self.MAX:
                for stale in list(self._until)[: self.MAX // 2]:
                    del self._until[stale]
            self._until[key] = until


def install_rate_limits(app: Flask, settings, metrics, breaker: CircuitBreaker, outage: OutageReporter
                        ) -> Callable[[], Response | None] | None:
    """Check every request against the first rule its path and method match, FIRST: before any
    other before-request hook (the admin's login and CSRF checks, the roles, the query-string
    check) and before any view; None when no limit is in force. Returns the check.

    The `limits` library directly (a MovingWindowRateLimiter over the storage above), not
    Flask-Limiter: a refusal must cost less than an answer, or a flood is cheapest to serve
    when it is refused (issue 33 item 11: every request a 429 at 724 requests/s, cached answers
    at 1,000). Flask-Limiter resolves, filters and re-parses its limits on every request;
    measured through the test client on this 2-core machine (ops/bench_ratelimit.py --refused):
    docs/design/abuse-and-faults.md. The key is the one Flask-Limiter wrote (client, then
    the rule's name as the scope), so windows in Redis carry over an upgrade."""
    rules = rules_from(settings)
    if not rules:
        return None
    limiter = MovingWindowRateLimiter(build_storage(settings, breaker, outage))
    items = {rule.name: RateLimitItemPerSecond(rule.rate.limit, rule.rate.window_s) for rule in rules}
    refused_until = RefusedUntil()

    def check_rate_limit() -> Response | None:
        rule = next((r for r in rules if r.matches(request.path, request.method)), None)
        if rule is None:
            return None
        client, item = client_key(request_client(settings)), items[rule.name]
        now = time.time()
        reset = refused_until.get((rule.name, client), now)
        if reset is None:
            if limiter.hit(item, client, rule.name):
                return None
            reset = limiter.get_window_stats(item, client, rule.name).reset_time
            refused_until.put((rule.name, client), reset)
        metrics.ratelimited.labels(rule.name).inc()
        return too_many_requests(rule, max(1, math.ceil(reset - now)))

    app.before_request_funcs.setdefault(None, []).insert(0, check_rate_limit)
    return check_rate_limit

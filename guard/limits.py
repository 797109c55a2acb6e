"""Per-client rate limits, chosen by request path, answered with 429 JSON and Retry-After.

    limit    paths                                methods   setting             when Redis is down
    search   /api/search, /api/kb/search          any       RATE_LIMIT_SEARCH   fail open
    events   /api/events (and below)              any       RATE_LIMIT_EVENTS   fail open
    login    /admin/login                         POST      RATE_LIMIT_LOGIN    per-process window

Rules are matched on the path (the path itself or anything below it), not on a view, so a route
added later under a limited path (the events API) is limited from its first request. The client
is `infra.clients.client_address`: the TCP peer, or behind TRUSTED_PROXIES the first untrusted
hop of X-Forwarded-For. With REDIS_URL every worker and host shares one count per client and
limit (infra.ratelimit.RedisWindow); without it each process counts alone (the embedded default,
one process). RATE_LIMITS=0, or a limit set to `off`, switches limiting off.

When Redis cannot be asked, the public search and events APIs answer unlimited rather than not
at all (fail open: a homepage search box must keep working), and the login form falls back to a
per-process window (a password guesser must never go unlimited). Either way the outage is
logged once and each such decision counted in taskfinder_ratelimit_backend_errors_total.
"""
from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, Response, jsonify, request

from infra.clients import client_address
from infra.ratelimit import BackendUnavailable, Decision, MemoryWindow, OutageReporter, Rate

OPEN, LOCAL = "open", "local"


@dataclass(frozen=True)
class Rule:
    name: str                          # the `limit` label of the metrics; part of the counter key
    paths: tuple[str, ...]
    methods: frozenset[str] | None     # None: every method
    rate: Rate
    on_outage: str                     # OPEN or LOCAL

    def matches(self, path: str, method: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return any(path == p or path.startswith(p + "/") for p in self.paths)


def rules_from(settings) -> tuple[Rule, ...]:
    """The limits in force: every configured one, none when RATE_LIMITS=0."""
    if not settings.rate_limits:
        return ()
    candidates = (
        ("search", ("/api/search", "/api/kb/search"), None, settings.rate_limit_search, OPEN),
        ("events", ("/api/events",), None, settings.rate_limit_events, OPEN),
        ("login", ("/admin/login",), frozenset({"POST"}), settings.rate_limit_login, LOCAL),
    )
    return tuple(Rule(name, paths, methods, rate, outage)
                 for name, paths, methods, rate, outage in candidates if rate is not None)


def request_client(settings) -> str:
    """The client of the current request (see infra.clients.client_address)."""
    return client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), settings.trusted_proxies)


class RateLimiter:
    """Decides per (rule, client): `shared` (a RedisWindow, or a MemoryWindow without Redis)
    first; `local` when the shared store fails and the rule falls back to this process."""

    def __init__(self, rules: tuple[Rule, ...], shared, local: MemoryWindow | None = None,
                 outage: OutageReporter | None = None):
        self.rules = rules
        self.shared = shared
        self.local = local or MemoryWindow()
        self.outage = outage or OutageReporter("rate-limit store")

    def rule_for(self, path: str, method: str) -> Rule | None:
        return next((rule for rule in self.rules if rule.matches(path, method)), None)

    def check(self, rule: Rule, client: str) -> Decision | None:
        """The decision for one request of `client` under `rule`; None when it goes unlimited
        because the shared store is down and the rule fails open."""
        key = f"{rule.name}:{client}"
        try:
            decision = self.shared.hit(key, rule.rate)
        except BackendUnavailable as exc:
            consequence = "the login form is limited per worker" if rule.on_outage == LOCAL else \
                f"the {rule.name} API is not rate-limited (fail open)"
            self.outage.failed(exc, consequence)
            return self.local.hit(key, rule.rate) if rule.on_outage == LOCAL else None
        self.outage.succeeded()
        return decision


def too_many_requests(rule: Rule, decision: Decision) -> Response:
    """429 with a message a person can act on and Retry-After in whole seconds."""
    response = jsonify({"error": f"too many requests: this client may make {rule.rate.limit} {rule.name} requests "
                                 f"per {rule.rate.window_s} s; retry in {decision.retry_after_s} s",
                        "retry_after_s": decision.retry_after_s})
    response.status_code = 429
    response.headers["Retry-After"] = str(decision.retry_after_s)
    return response


def install_rate_limits(app: Flask, limiter: RateLimiter, settings, metrics) -> None:
    """Check every request against the first rule its path and method match, before any view
    (and before the admin's own login and CSRF checks)."""
    if not limiter.rules:
        return

    @app.before_request
    def enforce_rate_limit() -> Response | None:
        rule = limiter.rule_for(request.path, request.method)
        if rule is None:
            return None
        decision = limiter.check(rule, request_client(settings))
        if decision is None or decision.allowed:
            return None
        metrics.ratelimited.labels(rule.name).inc()
        return too_many_requests(rule, decision)

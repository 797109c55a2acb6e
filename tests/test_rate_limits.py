"""Per-client rate limits (web.limits, `limits` moving windows) and the login throttle (admin.throttle) on
real Redis (127.0.0.1:6379, or TEST_REDIS_URL), each test under its own key prefix; API security
headers.

"Two workers" are two apps built from the same settings: separate processes' worth of state
(their own in-process counters, throttle, Redis connection), sharing only Redis, as gunicorn
workers do.
"""
from __future__ import annotations

import logging
import re
import time

import pytest
import redis as redis_lib

from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from admin.throttle import ACCOUNT, PAIR, LoginThrottle
from catalog.records import CaseRecord, TaskRecord
from web.limits import OutageReporter, ResilientStorage
from infra.breaker import CircuitBreaker
from web.clients import client_address
from settings import Rate, Settings, SettingsError, parse_rate
from tests.conftest import ADMIN_PASSWORD as PASSWORD, FAST_HASHER, REDIS_URL, admin_login, build_app, make_settings

DOWN_REDIS_URL = "redis://127.0.0.1:1/0"   # nothing listens on port 1
TASKS = [TaskRecord(id="lead", name="Lead Screening", help="Blood lead level results.", category="health"),
         TaskRecord(id="pool", name="Application Pool", help="Applicants and selection points.", category="ersea")]
CASES = [CaseRecord(query="eligibility", gold=("pool",), rationale="Eligibility is decided in the pool.")]


def store(prefix: str, url: str = REDIS_URL) -> ResilientStorage:
    """The Redis storage one worker would have (web.limits), with its own breaker and outage log."""
    return ResilientStorage("taskfinder+" + url, key_prefix=prefix)


def window(storage) -> MovingWindowRateLimiter:
    return MovingWindowRateLimiter(storage)


def per_s(rate: Rate):
    return RateLimitItemPerSecond(rate.limit, rate.window_s)


def make_app(tmp_path, shared_cache_dir, **env):
    """A small app (two tasks, no embeddings) with rate limits on, plus an editor `eddie`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = make_settings(tmp_path, shared_cache_dir, **{"EMBEDDINGS_ENABLED": "0", "RATE_LIMITS": "1",
                             "SESSION_COOKIE_SECURE": "0", "SECRET_KEY": "k" * 40, **env})
    app = build_app(settings, TASKS, CASES)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", PASSWORD, "editor", actor="cli:test")
    return app


def metric(app, name: str, **labels) -> float:
    """A sample's value from the app's own /metrics text."""
    text = app.test_client().get("/metrics").get_data(as_text=True)
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = "^" + re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if wanted else "") + r" (\S+)$"
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def search(client, address="198.51.100.1", **headers):
    return client.get("/api/search", query_string={"q": "lead"}, headers=headers,
                      environ_base={"REMOTE_ADDR": address})


# -- configuration ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, rate", [
    ("120/minute", Rate(120, 60)), ("10/30s", Rate(10, 30)), ("1000 per hour", Rate(1000, 3600)),
    ("5/second", Rate(5, 1)), ("2/day", Rate(2, 86400)), ("7/min", Rate(7, 60)), ("off", None), ("0", None),
])
def test_rates_are_read_from_count_per_unit_strings(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["120", "ten/minute", "5/fortnight", "0/minute", "5/0s", "-1/minute"])
def test_a_bad_rate_stops_the_start_naming_the_variable(text):
    with pytest.raises(SettingsError, match="RATE_LIMIT_SEARCH="):
        Settings.from_env({"RATE_LIMIT_SEARCH": text})


def test_rate_limit_settings():
    settings = Settings.from_env({"RATE_LIMIT_SEARCH": "60/minute", "RATE_LIMIT_LOGIN": "off",
                                  "REDIS_URL": "redis://h:6379/2"})
    assert (settings.rate_limit_search, settings.rate_limit_login, settings.redis_url) == \
        (Rate(60, 60), None, "redis://h:6379/2")
    assert "redis://" not in repr(settings)  # a URL may carry a password


# -- who the client is -----------------------------------------------------------------------
@pytest.mark.parametrize("peer, forwarded, client", [
    ("203.0.113.9", "198.51.100.1", "203.0.113.9"),                   # an untrusted peer's header is ignored
    ("10.0.0.2", None, "10.0.0.2"),                                   # a proxy with no header: the proxy
    ("10.0.0.2", "198.51.100.1", "198.51.100.1"),
    ("10.0.0.2", "1.2.3.4, 198.51.100.1", "198.51.100.1"),            # the client's own claim is left of it
    ("10.0.0.2", "198.51.100.1, 10.0.0.3", "198.51.100.1"),           # two proxies of ours
    ("10.0.0.2", "garbage, 10.0.0.3", "10.0.0.3"),                    # nothing left of garbage is believed
    ("10.0.0.2", "10.0.0.4, 10.0.0.3", "10.0.0.4"),                   # proxies all the way: the leftmost
    (None, "198.51.100.1", "-"),
])
def test_the_client_is_the_first_untrusted_hop(peer, forwarded, client):
    assert client_address(peer, forwarded, ("10.0.0.0/8",)) == client


# -- the counters ----------------------------------------------------------------------------
def test_a_redis_window_is_shared_by_every_client_of_the_same_redis(prefix):
    worker_a, worker_b = window(store(prefix)), window(store(prefix))
    rate = per_s(Rate(3, 60))
    decisions = [worker.hit(rate, "x", "search") for worker in (worker_a, worker_b, worker_a, worker_b)]
    assert decisions == [True, True, True, False]
    stats = worker_a.get_window_stats(rate, "x", "search")
    assert stats.remaining == 0 and 55 <= stats.reset_time - time.time() <= 60
    assert worker_b.hit(rate, "y", "search")  # another client has its own count


def test_a_refused_hit_is_not_counted_and_the_window_reopens(prefix):
    limiter = window(store(prefix))
    rate = per_s(Rate(2, 1))
    assert [limiter.hit(rate, "k", "search") for _ in range(5)] == [True, True, False, False, False]
    time.sleep(1.1)
    assert [limiter.hit(rate, "k", "search") for _ in range(3)] == [True, True, False]


def test_the_memory_window_follows_the_same_rule():
    limiter = window(MemoryStorage())
    rate = per_s(Rate(2, 10))
    assert [limiter.hit(rate, "k", "search") for _ in range(3)] == [True, True, False]
    assert 9 <= limiter.get_window_stats(rate, "k", "search").reset_time - time.time() <= 10


def test_the_window_moves_a_fixed_window_would_let_twice_the_limit_through(prefix):
    """2 per second, hits at 0 s and 0.9 s: at 1.1 s a fixed window (opened at 0 s) has reopened
    and lets two more through (four within 0.2 s); the moving window still holds the 0.9 s hit
    and lets one through."""
    limiter = window(store(prefix))
    rate = per_s(Rate(2, 1))
    assert limiter.hit(rate, "k", "search")
    time.sleep(0.9)
    assert limiter.hit(rate, "k", "search")
    time.sleep(0.2)
    assert [limiter.hit(rate, "k", "search") for _ in range(2)] == [True, False]


def test_a_redis_that_is_down_fails_open_or_counts_here_then_is_not_asked_for_a_while():
    errors = []
    breaker = CircuitBreaker(3, 60)
    down = ResilientStorage("taskfinder+" + DOWN_REDIS_URL, breaker=breaker,
                            outage=OutageReporter("redis", lambda: errors.append(1)))
    limiter, rate = window(down), per_s(Rate(1, 60))
    assert [limiter.hit(rate, "k", "search") for _ in range(3)] == [True] * 3   # fail open
    assert breaker.state == "open" and len(errors) == 3
    started = time.perf_counter()
    assert [limiter.hit(rate, "k", "login") for _ in range(2)] == [True, False]  # counted in this process
    assert time.perf_counter() - started < 0.1   # the open breaker does not wait for Redis
    assert len(errors) == 5


# -- the HTTP API ----------------------------------------------------------------------------
def test_two_workers_share_one_search_budget_and_answer_429_with_retry_after(tmp_path, shared_cache_dir, prefix):
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "RATE_LIMIT_SEARCH": "4/minute"}
    worker_a = make_app(tmp_path / "a", shared_cache_dir, **env)
    worker_b = make_app(tmp_path / "b", shared_cache_dir, **env)
    a, b = worker_a.test_client(), worker_b.test_client()
    assert [search(c).status_code for c in (a, b, a, b)] == [200] * 4
    refused = search(a)
    assert refused.status_code == 429
    assert 55 <= int(refused.headers["Retry-After"]) <= 60
    body = refused.get_json()
    assert body["error"].startswith("too many requests: this client may make 4 search requests per 60 s; retry in")
    assert body["retry_after_s"] == int(refused.headers["Retry-After"])
    # the knowledge base is part of the same public search budget
    assert b.get("/api/kb/search", query_string={"corpus": "x", "q": "lead"},
                 environ_base={"REMOTE_ADDR": "198.51.100.1"}).status_code == 429
    assert search(b, address="198.51.100.2").status_code == 200      # another client
    assert a.get("/healthz", environ_base={"REMOTE_ADDR": "198.51.100.1"}).status_code == 200  # not limited
    assert metric(worker_a, "taskfinder_ratelimited_responses_total", limit="search") == 1
    assert metric(worker_b, "taskfinder_ratelimited_responses_total", limit="search") == 1
    assert metric(worker_a, "taskfinder_http_requests_total", endpoint="/api/search", status="429") == 1


def test_forwarded_for_counts_only_behind_a_trusted_proxy(tmp_path, shared_cache_dir, prefix):
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "RATE_LIMIT_SEARCH": "2/minute"}
    direct = make_app(tmp_path / "direct", shared_cache_dir, **env).test_client()
    # a client cannot buy a fresh budget by inventing X-Forwarded-For
    codes = [search(direct, **{"X-Forwarded-For": f"192.0.2.{i}"}).status_code for i in range(3)]
    assert codes == [200, 200, 429]
    proxied = make_app(tmp_path / "proxied", shared_cache_dir, TRUSTED_PROXIES="10.0.0.0/8",
                       **{**env, "REDIS_KEY_PREFIX": prefix + "p:"}).test_client()
    for user in ("192.0.2.1", "192.0.2.2"):
        codes = [search(proxied, "10.0.0.5", **{"X-Forwarded-For": f"6.6.6.6, {user}"}).status_code for _ in range(3)]
        assert codes == [200, 200, 429]


def test_the_events_api_has_its_own_budget(tmp_path, shared_cache_dir, prefix):
    """The events API (analytics/, another blueprint) is limited by path, over its own budget:
    the third batch within the minute is refused, a search still answers."""
    app = make_app(tmp_path, shared_cache_dir, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix,
                   RATE_LIMIT_EVENTS="2/minute", RATE_LIMIT_SEARCH="100/minute")
    client = app.test_client()
    batch = {"session_id": "session-0001",
             "events": [{"type": "click", "search_id": "s" * 22, "task_id": "health.asq3-screening", "position": 1}]}
    answers = [client.post("/api/events", json=batch, environ_base={"REMOTE_ADDR": "198.51.100.1"}) for _ in range(3)]
    assert [r.status_code for r in answers] == [202, 202, 429]
    assert int(answers[-1].headers["Retry-After"]) >= 1
    assert search(client).status_code == 200  # its own budget


def test_login_posts_are_limited_before_the_password_is_checked(tmp_path, shared_cache_dir, prefix):
    app = make_app(tmp_path, shared_cache_dir, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix, RATE_LIMIT_LOGIN="2/minute")
    client = app.test_client()
    assert [admin_login(client, "eddie", "wrong password!").status_code for _ in range(2)] == [401, 401]
    refused = admin_login(client, "eddie")  # the right password, over the limit
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert client.get("/admin/login").status_code == 200  # the form itself is not limited
    assert metric(app, "taskfinder_ratelimited_responses_total", limit="login") == 1


def test_a_refused_client_is_refused_from_memory_until_its_window_frees(tmp_path, shared_cache_dir, prefix):
    """Issue 33 item 11: refusing must cost less than answering. After its first refusal a
    client's later requests are refused without asking Redis (a full moving window frees nothing
    before its reset time): emptying Redis behind the worker's back changes nothing for it,
    while another worker, which asks Redis, answers. ops/bench_ratelimit.py --modes
    off,refused,refused-redis measures the cost (docs/design/abuse-and-faults.md)."""
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "RATE_LIMIT_SEARCH": "2/minute"}
    worker_a = make_app(tmp_path / "a", shared_cache_dir, **env).test_client()
    assert [search(worker_a).status_code for _ in range(3)] == [200, 200, 429]
    client = redis_lib.Redis.from_url(REDIS_URL)
    client.delete(*client.scan_iter(match=prefix + "*"))          # the window is gone from Redis
    again = search(worker_a)
    assert again.status_code == 429 and 1 <= int(again.headers["Retry-After"]) <= 60
    worker_b = make_app(tmp_path / "b", shared_cache_dir, **env).test_client()
    assert search(worker_b).status_code == 200                     # Redis was asked: empty


def test_the_limit_is_checked_before_anything_else_the_request_would_run(tmp_path, shared_cache_dir, prefix):
    """A login post over its limit is refused before the CSRF check (which would answer 400)."""
    app = make_app(tmp_path, shared_cache_dir, REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix, RATE_LIMIT_LOGIN="1/minute")
    client = app.test_client()
    no_token = {"username": "eddie", "password": "x"}
    first = client.post("/admin/login", data=no_token, environ_base={"REMOTE_ADDR": "198.51.100.1"})
    assert first.status_code == 400                                 # CSRF: the request ran
    second = client.post("/admin/login", data=no_token, environ_base={"REMOTE_ADDR": "198.51.100.1"})
    assert second.status_code == 429


def test_limits_switch_off(tmp_path, shared_cache_dir):
    for env in ({"RATE_LIMITS": "0", "RATE_LIMIT_SEARCH": "1/minute"}, {"RATE_LIMIT_SEARCH": "off"}):
        app = make_app(tmp_path / str(len(env)), shared_cache_dir, **env)
        env_codes = [search(app.test_client()).status_code for _ in range(3)]
        assert env_codes == [200, 200, 200]


def test_without_redis_each_process_counts_alone(tmp_path, shared_cache_dir):
    app = make_app(tmp_path, shared_cache_dir, RATE_LIMIT_SEARCH="2/minute")
    assert [search(app.test_client()).status_code for _ in range(3)] == [200, 200, 429]


def test_redis_down_search_fails_open_login_falls_back_to_this_process(tmp_path, shared_cache_dir, caplog):
    app = make_app(tmp_path, shared_cache_dir, REDIS_URL=DOWN_REDIS_URL, RATE_LIMIT_SEARCH="2/minute",
                   RATE_LIMIT_LOGIN="2/minute")
    client = app.test_client()
    with caplog.at_level(logging.WARNING, logger="web.limits"):
        assert [search(client).status_code for _ in range(6)] == [200] * 6
        assert [admin_login(client, "eddie", "wrong password!").status_code for _ in range(2)] == [401, 401]
        assert admin_login(client, "eddie").status_code == 429
    outage_logs = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(outage_logs) == 1 and "fail open" in outage_logs[0].getMessage()
    assert metric(app, "taskfinder_ratelimit_backend_errors_total") >= 9
    assert metric(app, "taskfinder_circuit_breaker_state", breaker="redis", state="open") == 1


# -- the login throttle ----------------------------------------------------------------------
def test_the_redis_throttle_locks_a_key_for_every_worker(prefix):
    worker_a, worker_b = LoginThrottle(store(prefix), 3, 60), LoginThrottle(store(prefix), 3, 60)
    worker_a.failed("eddie", "192.0.2.7")
    worker_b.failed("eddie", "192.0.2.7")
    assert worker_a.locked_for("eddie", "192.0.2.7").seconds == 0
    worker_a.failed("eddie", "192.0.2.7")
    lockout = worker_b.locked_for("eddie", "192.0.2.7")
    assert 59 <= lockout.seconds <= 60 and lockout.window == PAIR
    assert worker_a.locked_for("eddie", "192.0.2.8").seconds == 0
    worker_b.succeeded("eddie", "192.0.2.7")
    assert worker_a.locked_for("eddie", "192.0.2.7").seconds == 0


def test_the_redis_throttle_forgets_after_its_window(prefix):
    throttle = LoginThrottle(store(prefix), 2, 1)
    throttle.failed("k", "a")
    time.sleep(1.1)
    throttle.failed("k", "a")  # the first failure has left the window
    assert throttle.locked_for("k", "a").seconds == 0
    throttle.failed("k", "a")
    assert throttle.locked_for("k", "a").seconds > 0
    time.sleep(1.1)
    assert throttle.locked_for("k", "a").seconds == 0


def test_the_redis_throttle_falls_back_to_this_process_when_redis_is_down():
    throttle = LoginThrottle(store("x:", DOWN_REDIS_URL), 2, 60)
    throttle.failed("k", "a")
    throttle.failed("k", "a")
    assert 59 <= throttle.locked_for("k", "a").seconds <= 60  # never unthrottled, never refused outright


def test_one_account_guessed_from_many_addresses_is_slowed(prefix):
    """LOGIN_ACCOUNT_MAX_FAILURES failures of one name, each from another address, slow that
    name everywhere (also the right password from a fresh address): the back-off's first wait,
    1 s, doubling with each further failure (issue 42 item 6: never the whole window); other
    names are free; a success empties the window."""
    worker_a, worker_b = LoginThrottle(store(prefix), 5, 60, 3), LoginThrottle(store(prefix), 5, 60, 3)
    for i, worker in enumerate((worker_a, worker_b, worker_a)):
        assert worker.locked_for("Eddie", f"198.51.100.{i}").seconds == 0
        worker.failed("Eddie", f"198.51.100.{i}")
    lockout = worker_b.locked_for("eddie ", "203.0.113.50")
    assert lockout.window == ACCOUNT and lockout.seconds == 1
    assert worker_a.locked_for("vera", "198.51.100.1").seconds == 0
    worker_a.succeeded("eddie", "198.51.100.9")
    assert worker_b.locked_for("eddie", "203.0.113.50").seconds == 0


def test_failed_logins_on_two_workers_lock_the_user_out_of_both(tmp_path, shared_cache_dir, prefix):
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "LOGIN_MAX_FAILURES": "4", "RATE_LIMIT_LOGIN": "off"}
    a = make_app(tmp_path / "a", shared_cache_dir, **env).test_client()
    b = make_app(tmp_path / "b", shared_cache_dir, **env).test_client()
    for client in (a, b, a, b):
        assert admin_login(client, "eddie", "wrong password!", address="192.0.2.7").status_code == 401
    for client in (a, b):
        locked = admin_login(client, "eddie", address="192.0.2.7")
        assert locked.status_code == 429 and "Too many failed sign-ins" in locked.get_data(as_text=True)
    assert admin_login(a, "eddie", address="192.0.2.8").status_code == 302


def test_guessing_one_account_from_many_addresses_locks_that_account(tmp_path, shared_cache_dir, prefix):
    """Issue 17 item 8: the per-(name, address) lockout alone lets a guesser with many addresses
    try forever; LOGIN_ACCOUNT_MAX_FAILURES failures of one name lock it on every worker."""
    env = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix, "LOGIN_MAX_FAILURES": "5",
           "LOGIN_ACCOUNT_MAX_FAILURES": "3", "RATE_LIMIT_LOGIN": "off"}
    app_a = make_app(tmp_path / "a", shared_cache_dir, **env)
    a, b = app_a.test_client(), make_app(tmp_path / "b", shared_cache_dir, **env).test_client()
    for i, client in enumerate((a, b, a)):
        assert admin_login(client, "eddie", "wrong password!", address=f"198.51.100.{i}").status_code == 401
    for client in (a, b):   # the right password, from an address that never failed
        locked = admin_login(client, "eddie", address="203.0.113.77")
        assert locked.status_code == 429 and "Too many failed sign-ins" in locked.get_data(as_text=True)
    assert metric(app_a, "taskfinder_ratelimited_responses_total", limit="login_account") == 1
    accounts = app_a.extensions["taskfinder"].accounts
    accounts.create_user("vera", PASSWORD, "viewer", actor="cli:test")
    assert admin_login(a, "vera", address="203.0.113.77").status_code == 302   # another account is free


# -- security headers ------------------------------------------------------------------------
API_HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
               "Referrer-Policy": "no-referrer"}


def test_api_responses_carry_strict_security_headers_pages_keep_theirs(tmp_path, shared_cache_dir):
    app = make_app(tmp_path, shared_cache_dir, RATE_LIMIT_SEARCH="3/minute")
    client = app.test_client()
    answers = [search(client), client.get("/api/search"), client.get("/api/kb/search?corpus=x&q=a"),
               client.get("/api/nowhere"), client.get("/healthz"), client.get("/readyz"), client.get("/metrics"),
               client.get("/openapi.json")]
    answers += [search(client) for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 400, 400, 404, 200, 200, 200, 200, 200, 200, 429]
    for response in answers:
        assert {name: response.headers.get(name) for name in API_HEADERS} == API_HEADERS, response.request.path
    login_page = client.get("/admin/login")
    assert "default-src 'self'" in login_page.headers["Content-Security-Policy"]  # the admin's own, not replaced
    widget, home = client.get("/widget.js"), client.get("/")   # served for embedding: their own headers
    assert widget.status_code == 200 and "Referrer-Policy" not in widget.headers
    assert home.status_code == 200 and "script-src 'self'" in home.headers["Content-Security-Policy"]
    assert home.headers["Referrer-Policy"] == "same-origin"   # the homepage's own, not the API's no-referrer


def test_api_headers_never_replace_a_header_a_response_already_has():
    from web.headers import is_api_path, with_api_headers

    headers = with_api_headers([("Content-Type", "application/json"), ("content-security-policy", "sandbox")])
    assert [v for n, v in headers if n.lower() == "content-security-policy"] == ["sandbox"]
    assert ("X-Frame-Options", "DENY") in headers and ("X-Content-Type-Options", "nosniff") in headers
    assert [is_api_path(p) for p in ("/api", "/api/search", "/metrics", "/apix", "/admin/api/cases", "/", "/healthzz")] \
        == [True, True, True, False, False, False, False]

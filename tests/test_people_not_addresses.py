"""Issue 42 items 4-8 ("People, not addresses"), from a live security audit:

4. one IPv6 /64 is one client (rate limits, event caps, login windows, sessions per address), and
   one /48 cannot fill the cap of everyone either (infra.addresses, analytics.budget);
5. /metrics behind a trusted proxy only for a client known to be local (api.search);
6. a stranger's guesses slow the next ones, never hold the owner's right password for the whole
   lockout window (admin.throttle's back-off);
7. a restricted task's demo page is a missing page to whoever may not see it (widget.blueprint);
8. the JSON API's rollback needs `based_on` and refuses a stale one (admin.editor).

Storage is involved in 4 and 8: those run on SQLite and PostgreSQL.
"""
from __future__ import annotations

import json
import re

import pytest
from limits.storage import MemoryStorage

from admin.throttle import ACCOUNT, LoginThrottle
from analytics.sources import AddressSessions
from api.roles import sign_role_token
from infra.addresses import client_key, network_of
from tests.conftest import admin_login, build_app, close_app, make_settings, postgres_schema

SID = "E" * 22
ONE_64 = [f"2001:db8:1:2::{i:x}" for i in range(1, 41)]           # 40 addresses of one host's /64
ONE_48 = [f"2001:db8:1:{i:x}::1" for i in range(1, 41)]           # 40 /64s of one /48
VICTIM = "2001:db8:ffff:1::5"                                       # another network


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request):
    if request.param == "sqlite":
        yield {}
        return
    with postgres_schema() as (_schema, url):
        yield {"DATABASE_URL": url}


def app_with(tmp_path, shared_cache_dir, tasks, **env):
    return build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0", **env), tasks, [])


def post_events(client, address: str, session: str, n: int):
    events = [{"type": "click", "search_id": SID, "task_id": f"t.{i}", "position": 1} for i in range(n)]
    return client.post("/api/events", data=json.dumps({"session_id": session, "events": events}),
                       content_type="application/json", environ_base={"REMOTE_ADDR": address})


# -- 4. addresses grouped: one /64 is one client -------------------------------------------------
def test_a_client_is_an_ipv4_address_or_an_ipv6_64_and_a_network_a_24_or_a_48():
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert {client_key(a) for a in ONE_64} == {"2001:db8:1:2::/64"}
    assert len({client_key(a) for a in ONE_48}) == 40
    assert client_key("-") == "-" and client_key("person:4711") == "person:4711"
    assert network_of("192.0.2.7") == network_of("::ffff:192.0.2.200") == "192.0.2.0/24"
    assert {network_of(a) for a in ONE_48} == {"2001:db8:1::/48"}
    assert network_of("garbage") is None
    import analytics.sources
    assert analytics.sources.network_of is network_of   # one implementation


def test_forty_addresses_of_one_64_share_one_event_budget(tmp_path, shared_cache_dir, demo_tasks, database):
    """Before: each address had its own 50 events a minute, 40 of them filled the cap of
    everyone (1,000) and the victim's events answered 429 "too many events from everyone"."""
    app = app_with(tmp_path, shared_cache_dir, demo_tasks[:3], ANALYTICS_FLUSH_INTERVAL_S="3600",
                   ANALYTICS_ADDRESS_EVENTS_PER_MINUTE="50", ANALYTICS_EVENTS_PER_MINUTE="1000", **database)
    try:
        client = app.test_client()
        statuses = [post_events(client, address, f"flood-{i:04d}-xxxxx", 50).status_code
                    for i, address in enumerate(ONE_64)]
        assert statuses[0] == 202 and statuses[1:] == [429] * 39
        victim = post_events(client, VICTIM, "victim-0001-xxxxx", 10)
        assert victim.status_code == 202, victim.get_data(as_text=True)
    finally:
        close_app(app)


def test_one_48_cannot_fill_the_cap_of_everyone(tmp_path, shared_cache_dir, demo_tasks, database):
    """Many /64s of one /48 are many clients, but one network: it gets
    ANALYTICS_NETWORK_EVENTS_PER_MINUTE of the cap of everyone, and the rest stays for others."""
    app = app_with(tmp_path, shared_cache_dir, demo_tasks[:3], ANALYTICS_FLUSH_INTERVAL_S="3600",
                   ANALYTICS_ADDRESS_EVENTS_PER_MINUTE="50", ANALYTICS_NETWORK_EVENTS_PER_MINUTE="200",
                   ANALYTICS_EVENTS_PER_MINUTE="1000", **database)
    try:
        client = app.test_client()
        statuses = [post_events(client, address, f"flood-{i:04d}-xxxxx", 50).status_code
                    for i, address in enumerate(ONE_48)]
        assert statuses.count(202) == 4
        refused = post_events(client, "2001:db8:1:ffff::1", "flood-more-xxxxx", 1)   # a fresh /64 of it
        assert refused.status_code == 429 and "this network" in refused.get_json()["error"]
        victim = post_events(client, VICTIM, "victim-0001-xxxxx", 10)
        assert victim.status_code == 202, victim.get_data(as_text=True)
    finally:
        close_app(app)


def test_forty_addresses_of_one_64_share_one_search_rate_limit(tmp_path, shared_cache_dir, demo_tasks):
    app = app_with(tmp_path, shared_cache_dir, demo_tasks[:3], RATE_LIMITS="1", RATE_LIMIT_SEARCH="5/minute")
    try:
        client = app.test_client()
        statuses = [client.get("/api/search?q=lead", environ_base={"REMOTE_ADDR": a}).status_code for a in ONE_64]
        assert statuses[:5] == [200] * 5 and statuses[5:] == [429] * 35
        assert client.get("/api/search?q=lead", environ_base={"REMOTE_ADDR": VICTIM}).status_code == 200
        mapped = [client.get("/api/search?q=lead", environ_base={"REMOTE_ADDR": a}).status_code
                  for a in ["192.0.2.1", "::ffff:192.0.2.1"] * 3]
        assert mapped == [200] * 5 + [429]   # an IPv4-mapped address is its IPv4 address
    finally:
        close_app(app)


def test_forty_addresses_of_one_64_share_one_login_window():
    throttle = LoginThrottle(MemoryStorage(), max_failures=5, window_s=900)
    for address in ONE_64[:5]:
        assert throttle.locked_for("eddie", address).seconds == 0
        throttle.failed("eddie", address)
    assert all(throttle.locked_for("eddie", address).seconds > 0 for address in ONE_64)
    assert throttle.locked_for("eddie", VICTIM).seconds == 0


def test_forty_addresses_of_one_64_bring_one_address_worth_of_sessions():
    gate = AddressSessions(limit=3)
    admitted = [gate.admit(address, f"session-{i}") for i, address in enumerate(ONE_64)]
    assert admitted.count(True) == 3
    assert gate.admit(VICTIM, "victim-session")


# -- 5. /metrics behind a trusted proxy -------------------------------------------------------------
@pytest.mark.parametrize("forwarded", ["unknown", "garbage", "127.0.0.1:80", "[::1]", "unknown, 127.0.0.1",
                                       "203.0.113.7"])
def test_metrics_refuse_a_forwarded_client_that_is_not_known_to_be_local(tmp_path, shared_cache_dir, forwarded):
    """Before: a hop that is not a bare IP address made the client the proxy's own loopback: 200."""
    app = app_with(tmp_path, shared_cache_dir, [], TRUSTED_PROXIES="127.0.0.1")
    try:
        client = app.test_client()
        response = client.get("/metrics", headers={"X-Forwarded-For": forwarded},
                              environ_base={"REMOTE_ADDR": "127.0.0.1"})
        remote = client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.7"})
        assert remote.status_code == 403
        assert response.status_code == remote.status_code, forwarded
    finally:
        close_app(app)


def test_metrics_answer_a_forwarded_loopback_client(tmp_path, shared_cache_dir):
    app = app_with(tmp_path, shared_cache_dir, [], TRUSTED_PROXIES="127.0.0.1")
    try:
        client = app.test_client()
        for headers in ({"X-Forwarded-For": "127.0.0.1"}, {"X-Forwarded-For": "::1"}, {}):
            assert client.get("/metrics", headers=headers,
                              environ_base={"REMOTE_ADDR": "127.0.0.1"}).status_code == 200, headers
    finally:
        close_app(app)


# -- 6. the owner from a new device ---------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_strangers_guesses_slow_the_next_ones_but_never_hold_the_owner_out_long():
    """Before: 20 wrong guesses in 15 minutes from anywhere refused the owner's right password
    from every new browser for the rest of those 15 minutes."""
    clock = Clock()
    throttle = LoginThrottle(MemoryStorage(), max_failures=5, window_s=900, account_max_failures=20,
                             account_backoff_max_s=60, clock=clock)
    guesses = 0
    for i in range(40):   # a botnet guessing as fast as it is let, 2 guesses per address
        address = f"198.51.100.{i // 2}"
        wait = throttle.locked_for("eddie", address)
        assert wait.seconds <= 60
        clock.now += wait.seconds
        assert throttle.locked_for("eddie", address).seconds == 0
        throttle.failed("eddie", address)
        guesses += 1
    # a stranger cannot guess fast: the next guess waits the capped delay
    stranger = throttle.locked_for("eddie", "198.51.100.77")
    assert stranger.window == ACCOUNT and 30 <= stranger.seconds <= 60
    # the owner, from a new device, with the right password: in within the capped delay
    owner = throttle.locked_for("eddie", "203.0.113.5")
    assert 0 < owner.seconds <= 60
    clock.now += owner.seconds
    assert throttle.locked_for("eddie", "203.0.113.5").seconds == 0
    throttle.succeeded("eddie", "203.0.113.5")


def test_the_owner_signs_in_through_the_form_after_the_capped_delay(tmp_path, shared_cache_dir):
    app = app_with(tmp_path, shared_cache_dir, [], SECRET_KEY="s" * 40)
    try:
        from tests.conftest import ADMIN_PASSWORD, FAST_HASHER
        accounts = app.extensions["taskfinder"].accounts
        accounts.hasher = FAST_HASHER
        accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
        clock = Clock()
        app.extensions["taskfinder_admin"].throttle.clock = clock
        for i in range(25):
            response = admin_login(app.test_client(), "eddie", "wrong password!", address=f"198.51.100.{i}")
            if response.status_code == 429:
                clock.now += int(response.headers["Retry-After"])
                response = admin_login(app.test_client(), "eddie", "wrong password!", address=f"198.51.100.{i}")
            assert response.status_code == 401
        owner = app.test_client()
        refused = admin_login(owner, "eddie", address="203.0.113.5")
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) <= 60
        clock.now += int(refused.headers["Retry-After"])
        assert admin_login(owner, "eddie", address="203.0.113.5").status_code == 302
    finally:
        close_app(app)


# -- 7. restricted tasks are missing pages to those who may not see them ---------------------------
HTML = {"Accept": "text/html"}
SECRET = "r" * 40


@pytest.fixture(scope="module")
def demo_pages(tmp_path_factory, shared_cache_dir, demo_tasks):
    app = build_app(make_settings(tmp_path_factory.mktemp("pages"), shared_cache_dir, EMBEDDINGS_ENABLED="0",
                                  ROLE_TOKEN_SECRET=SECRET), demo_tasks, [])
    yield app
    close_app(app)


def comparable(response, path: str):
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("date",)}
    return response.status_code, headers, response.get_data(as_text=True).replace(path, "<path>")


def test_a_restricted_tasks_page_is_a_missing_page_to_those_who_may_not_see_it(demo_pages, demo_tasks):
    task = next(t for t in demo_tasks if t.url == "/hr/background-checks")
    assert task.roles and "hr" in task.roles
    client = demo_pages.test_client()
    missing = client.get("/hr/background-checkz", headers=HTML)   # the same length: the same Content-Length
    assert missing.status_code == 404
    wrong_role = sign_role_token(SECRET, ["fiscal"] if "fiscal" not in task.roles else ["nobody"], 60)
    for extra in ({}, {"Authorization": f"Bearer {wrong_role}"}, {"Authorization": "Bearer forged"}):
        restricted = client.get("/hr/background-checks", headers={**HTML, **extra})
        other = client.get("/hr/background-checkz", headers={**HTML, **extra})
        assert comparable(restricted, "/hr/background-checks") == comparable(other, "/hr/background-checkz"), extra
        assert restricted.status_code == 404 and "restricted" not in restricted.get_data(as_text=True).lower()
    head = client.head("/hr/background-checks", headers=HTML)
    assert head.status_code == 404


def test_a_restricted_tasks_page_is_shown_to_a_verified_role(demo_pages, demo_tasks):
    task = next(t for t in demo_tasks if t.url == "/hr/background-checks")
    token = sign_role_token(SECRET, ["hr"], 60)
    page = demo_pages.test_client().get("/hr/background-checks", headers={**HTML, "Authorization": f"Bearer {token}"})
    assert page.status_code == 200 and task.name in page.get_data(as_text=True)
    by_query = demo_pages.test_client().get(f"/hr/background-checks?role_token={token}", headers=HTML)
    assert by_query.status_code == 200 and task.name in by_query.get_data(as_text=True)


# -- 8. rollback over the JSON API needs based_on --------------------------------------------------
@pytest.fixture
def editor_api(tmp_path, shared_cache_dir, demo_tasks, demo_cases, database):
    from tests.conftest import ADMIN_PASSWORD, FAST_HASHER
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0", SECRET_KEY="k" * 40,
                                  **database), demo_tasks[:10], [c for c in demo_cases
                                                                   if set(c.gold) <= {t.id for t in demo_tasks[:10]}])
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    yield app
    close_app(app)


def editor_headers(app):
    from tests.conftest import signed_in
    client, csrf = signed_in(app, "eddie")
    return client, {"X-CSRF-Token": csrf}


def test_a_json_rollback_without_based_on_is_a_400_and_a_stale_one_a_409(editor_api):
    app = editor_api
    client, headers = editor_headers(app)
    store = app.extensions["taskfinder"].store
    first = store.versions(limit=1_000)[-1].id
    before = store.version_count()
    missing = client.post(f"/admin/api/versions/{first}/rollback", headers=headers, json={"message": "oops"})
    assert missing.status_code == 400 and "based_on" in missing.get_json()["error"]
    no_body = client.post(f"/admin/api/versions/{first}/rollback", headers=headers)
    assert no_body.status_code == 400 and "based_on" in no_body.get_json()["error"]
    for bad in ("7", -1, 2**63, True, None):
        assert client.post(f"/admin/api/versions/{first}/rollback", headers=headers,
                           json={"based_on": bad}).status_code == 400, bad
    latest = store.versions(limit=1)[0].id
    stale = client.post(f"/admin/api/versions/{first}/rollback", headers=headers, json={"based_on": latest - 1})
    assert stale.status_code == 409 and re.search(r"version \d+ was published", stale.get_json()["error"])
    assert store.version_count() == before, "nothing was rolled back"
    done = client.post(f"/admin/api/versions/{first}/rollback", headers=headers, json={"based_on": latest})
    assert done.status_code == 200 and done.get_json()["rolled_back_to"] == first

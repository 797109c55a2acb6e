"""Issue 17 items 2, 3 and 8: /metrics is not public, /readyz does not echo exceptions, the
production server never signs sessions with a per-worker random key, and logging out (or a
password change, or a disable) ends a session server-side: a copied cookie stops working."""
from __future__ import annotations

import stat

import pytest

from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, admin_login, build_app, make_settings

TOKEN = "m" * 40


# -- item 8: /metrics and /readyz ----------------------------------------------------------------
def test_metrics_need_the_bearer_token_when_one_is_set(tmp_path, shared_cache_dir, demo_tasks):
    app = build_app(make_settings(tmp_path, shared_cache_dir, METRICS_TOKEN=TOKEN, EMBEDDINGS_ENABLED="0"),
                    demo_tasks[:5], [])
    client = app.test_client()
    refused = client.get("/metrics")
    assert refused.status_code == 401 and "METRICS_TOKEN" in refused.get_json()["error"]
    assert refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", headers={"Authorization": "Bearer " + "x" * 40}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Basic " + TOKEN}).status_code == 401
    allowed = client.get("/metrics", headers={"Authorization": "Bearer " + TOKEN})
    assert allowed.status_code == 200 and "taskfinder_" in allowed.get_data(as_text=True)


def test_without_a_token_metrics_answer_this_host_only(tmp_path, shared_cache_dir, demo_tasks):
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0"), demo_tasks[:5], [])
    client = app.test_client()
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1"}).status_code == 200
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "::1"}).status_code == 200
    remote = client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert remote.status_code == 403 and "METRICS_TOKEN" in remote.get_json()["error"]


def test_behind_a_trusted_proxy_metrics_judge_the_client_not_the_proxy(tmp_path, shared_cache_dir, demo_tasks):
    """Issue 33 item 9: with TRUSTED_PROXIES=127.0.0.1 a remote client forwarded by that proxy
    got 200 (its peer, the proxy, is loopback). The address the proxy saw decides."""
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0", TRUSTED_PROXIES="127.0.0.1"),
                    demo_tasks[:5], [])
    client = app.test_client()
    local = {"REMOTE_ADDR": "127.0.0.1"}
    forwarded = client.get("/metrics", environ_base=local, headers={"X-Forwarded-For": "203.0.113.9"})
    assert forwarded.status_code == 403 and "METRICS_TOKEN" in forwarded.get_json()["error"]
    spoofed = client.get("/metrics", environ_base=local, headers={"X-Forwarded-For": "127.0.0.1, 203.0.113.9"})
    assert spoofed.status_code == 403                      # what the client wrote left of it is not believed
    assert client.get("/metrics", environ_base=local).status_code == 200        # this host, no proxy hop
    assert client.get("/metrics", environ_base=local, headers={"X-Forwarded-For": "::1"}).status_code == 200


def test_readiness_does_not_echo_the_exception(tmp_path, shared_cache_dir, demo_tasks, monkeypatch):
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0"), demo_tasks[:5], [])
    search = app.extensions["taskfinder"].search

    def broken():
        raise RuntimeError("password=hunter2 host=db.internal:5432 /srv/secret/path")

    monkeypatch.setattr(search, "live", broken)
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    text = response.get_data(as_text=True)
    assert "hunter2" not in text and "db.internal" not in text and "RuntimeError" not in text
    assert response.get_json()["status"] == "unavailable"


# -- item 3: logout ends the session server-side ---------------------------------------------------
@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def two_workers(request, tmp_path_factory, shared_cache_dir, demo_tasks):
    """Two apps over one data directory and database, without SECRET_KEY: what two gunicorn
    workers are (each process calls create_app)."""
    from tests.conftest import postgres_schema

    data_dir = tmp_path_factory.mktemp("workers")
    tasks = demo_tasks[:5]

    def make(extra):
        apps = []
        for _ in range(2):
            app = build_app(make_settings(data_dir, shared_cache_dir, EMBEDDINGS_ENABLED="0", **extra), tasks, [])
            app.extensions["taskfinder"].accounts.hasher = FAST_HASHER
            apps.append(app)
        apps[0].extensions["taskfinder"].accounts.create_user("olga", ADMIN_PASSWORD, "editor", actor="cli:test")
        return apps, data_dir

    if request.param == "sqlite":
        yield make({})
        return
    with postgres_schema() as (_schema, url):
        apps, directory = make({"DATABASE_URL": url})
        yield apps, directory
        for app in apps:
            app.extensions["taskfinder_analytics"].close()
            app.extensions["taskfinder"].store.engine.dispose()


def session_cookie(client) -> str:
    return client.get_cookie("taskfinder_admin", path="/admin").value


def with_cookie(app, cookie: str):
    client = app.test_client()
    client.set_cookie("taskfinder_admin", cookie, path="/admin")
    return client


def test_a_cookie_copied_before_logout_stops_working(two_workers):
    (app, _other), _ = two_workers
    client = app.test_client()
    assert admin_login(client, "olga").status_code == 302
    copied = session_cookie(client)
    assert with_cookie(app, copied).get("/admin/api/tasks").status_code == 200
    csrf = client.get("/admin/").get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]
    assert client.post("/admin/logout", data={"csrf_token": csrf}).status_code == 302
    assert with_cookie(app, copied).get("/admin/api/tasks").status_code == 401
    assert with_cookie(app, copied).get("/admin/").status_code == 302


def test_a_password_change_and_a_disable_end_a_copied_session(two_workers):
    (app, _other), _ = two_workers
    accounts = app.extensions["taskfinder"].accounts
    for change in (lambda: accounts.set_password("olga", ADMIN_PASSWORD, actor="cli:test"),
                   lambda: accounts.set_active("olga", False, actor="cli:test")):
        client = app.test_client()
        assert admin_login(client, "olga").status_code == 302
        copied = session_cookie(client)
        change()
        assert with_cookie(app, copied).get("/admin/api/tasks").status_code == 401
    accounts.set_active("olga", True, actor="cli:test")


# -- item 2: one session key for every worker --------------------------------------------------------
def test_workers_without_secret_key_share_one_key_kept_in_the_data_directory(two_workers):
    """Before: each process signed with its own random key, so a session made by one worker was
    refused by the other (the 401s and CSRF failures of the audit)."""
    (first, second), data_dir = two_workers
    client = first.test_client()
    assert admin_login(client, "olga").status_code == 302
    cookie = session_cookie(client)
    for _ in range(3):
        assert with_cookie(second, cookie).get("/admin/api/tasks").status_code == 200
    key_file = data_dir / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert first.secret_key == second.secret_key == key_file.read_text().strip()


def test_workers_without_secret_key_give_one_address_one_network(two_workers):
    """Issue 33 item 2: the network pseudonym's key was random per process, so two sessions pinned
    to two gunicorn workers from ONE address counted as two networks (a pair's network rule
    bought with one address). Both workers now key it with the shared key file."""
    from api.events import bind_to_address
    from analytics.schema import parse_batch
    from catalog.models import utcnow

    (first, second), _ = two_workers
    networks = []
    for app, session in ((first, "A" * 22), (second, "B" * 22)):
        with app.test_request_context("/api/events", method="POST", environ_base={"REMOTE_ADDR": "198.51.100.7"}):
            batch = parse_batch({"session_id": session, "events": [
                {"type": "click", "search_id": "S" * 22, "task_id": "t", "position": 1}]}, utcnow())
            networks.append(bind_to_address(batch).events[0].network)
    assert networks[0] is not None and networks[0] == networks[1]


def test_a_key_file_others_can_read_is_refused(tmp_path):
    from infra.secret_key import SecretKeyError, shared_secret_key

    key = shared_secret_key(tmp_path)
    assert shared_secret_key(tmp_path) == key and len(key) >= 32
    (tmp_path / "secret_key").chmod(0o644)
    with pytest.raises(SecretKeyError, match="chmod 600"):
        shared_secret_key(tmp_path)

"""Live everywhere: an edit published by any process reaches every serving process within 2 s,
with no database read on the request path.

First the revision watcher (serving.watcher) and the service's use of it, on in-memory sources;
then two REAL servers sharing one database (SQLite file, PostgreSQL schema): gunicorn with two
workers (the production command) and `python app.py serve` (the embedded default). An editor
publishes a test case through the embedded server's admin JSON API; every process (that server
and both gunicorn workers) must answer the edited query with the new ranking before 2 s have
passed since the save answered, and again after a rollback published through the same API. The deadline is the product's promise, not a speed target: the typical
figure is measured by ops/bench_live_reload.py.
"""
from __future__ import annotations

import gc
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from admin.accounts import AccountStore
from catalog import db
from infra.metrics import Metrics
from ops.servers import ServerProcess, free_port, gunicorn_command, http_get, prepare_demo_database, server_env, \
    waitress_command
from serving.service import SearchService
from serving.watcher import RevisionWatcher
from tests.conftest import postgres_schema
from tests.test_index_refresh import NEW_TASK, TASKS, MemorySource

PROPAGATION_DEADLINE_S = 2.0


class CountingSource(MemorySource):
    """MemorySource that counts revision reads and can be made to fail them (database down)."""

    def __init__(self, tasks):
        super().__init__(tasks)
        self.revision_reads = 0
        self.down = False

    def revision(self):
        self.revision_reads += 1
        if self.down:
            raise ConnectionError("database is down")
        return super().revision()


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def ids(body: dict) -> list[str]:
    return [row["id"] for row in body["results"]]


# -- the watcher and the service -------------------------------------------------------------
def test_requests_do_not_read_the_revision_and_the_watcher_brings_the_change(settings):
    source = CountingSource(TASKS)
    service = SearchService(settings.with_overrides(revision_poll_s=3600), source, None, None, Metrics())
    try:
        assert service.live().revision == 1
        reads = source.revision_reads
        for _ in range(50):
            service.search("meal count", 5)
        assert source.revision_reads == reads  # no database read per request
        source.add(NEW_TASK)
        assert "meals.count" not in ids(service.search("meal count", 5))  # not polled yet
        assert service.watcher.poll_once()  # what the thread does every REVISION_POLL_S
        assert wait_for(lambda: service.live().revision == 2)  # rebuilt in the background
        assert "meals.count" in ids(service.search("meal count", 5))
    finally:
        service.close()


def test_the_watcher_thread_polls_by_itself(settings):
    source = CountingSource(TASKS)
    service = SearchService(settings.with_overrides(revision_poll_s=0.02), source, None, None, Metrics())
    try:
        service.live()
        assert service.watcher.running()
        source.add(NEW_TASK)
        # no request needed: the watcher starts the rebuild, a request only reads the result
        assert wait_for(lambda: service._live.revision == 2)
        assert service.metrics.catalog_revision._value.get() == 2
    finally:
        service.close()
    assert not service.watcher.running()


def test_a_failed_poll_keeps_serving_and_is_retried(settings):
    source = CountingSource(TASKS)
    service = SearchService(settings.with_overrides(revision_poll_s=0.02), source, None, None, Metrics())
    try:
        first = service.live()
        source.down = True
        reads = source.revision_reads
        assert wait_for(lambda: source.revision_reads >= reads + 3)  # retried, again and again
        assert service.watcher.last_error == "ConnectionError: database is down"
        assert service.watcher.running()
        assert service.live() is first and ids(service.search("bus routes", 3))[0] == "transport.routes"
        source.add(NEW_TASK)  # written while this process could not read the database
        source.down = False
        assert wait_for(lambda: service.live().revision == 2)
        assert service.watcher.last_error is None
    finally:
        service.close()


def test_wait_reads_the_revision_now(settings):
    source = CountingSource(TASKS)
    service = SearchService(settings.with_overrides(revision_poll_s=3600), source, None, None, Metrics())
    try:
        service.live()
        source.add(NEW_TASK)
        assert service.live(wait=True).revision == 2  # no poll needed
    finally:
        service.close()


def test_a_forked_child_starts_its_own_watcher(settings):
    """gunicorn forks workers: a thread of the parent does not exist in the child, which must
    start its own (the watcher remembers the pid it was started in)."""
    watcher = RevisionWatcher(lambda: 1, lambda revision: None, interval_s=3600)
    watcher.ensure_running()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running any pytest teardown
        try:
            before = watcher.running()
            watcher.ensure_running()
            os.write(write, json.dumps([before, watcher.running()]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        before, after = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert (before, after) == (False, True)
    assert watcher.running()
    watcher.stop()
    assert not watcher.running()


def test_a_dropped_service_ends_its_watcher(settings):
    service = SearchService(settings.with_overrides(revision_poll_s=0.01), CountingSource(TASKS), None, None,
                            Metrics())
    service.live()
    thread = service.watcher._thread
    del service
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


# -- two real servers sharing one database ---------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    with postgres_schema() as (_schema, url):
        yield url


def search_body(base_url: str, query: str) -> dict:
    status, body = http_get(f"{base_url}/api/search?" + urllib.parse.urlencode({"q": query, "k": 3}))
    assert status == 200, body
    return json.loads(body)


def pinned_to(body: dict, task_id: str) -> bool:
    return bool(body["results"]) and body["results"][0]["id"] == task_id and body["results"][0]["pinned"]


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))


def seconds_until(base_url: str, query: str, condition, deadline: float) -> float | None:
    """Poll `base_url`'s answer to `query` until `condition(body)`; the monotonic time it was
    first seen, or None if not by `deadline`."""
    while time.monotonic() < deadline:
        if condition(search_body(base_url, query)):
            return time.monotonic()
        time.sleep(0.02)
    return None


def admin_get(base_url: str, token: str, path: str) -> dict:
    request = urllib.request.Request(f"{base_url}/admin/api{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def admin_api(base_url: str, token: str, path: str, body: dict) -> dict:
    """POST `body` to the server's /admin/api (an editor's API token); the JSON answer."""
    request = urllib.request.Request(f"{base_url}/admin/api{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 201)
        return json.loads(response.read())


def test_a_save_in_one_server_reaches_every_server_process_within_two_seconds(database_url, tmp_path, demo_app,
                                                                              shared_cache_dir):
    demo_app.extensions["taskfinder"].search.live(wait=True)  # task embeddings in the shared cache
    prepare_demo_database(database_url)
    gunicorn_port, waitress_port = free_port(), free_port()
    common = {"DATABASE_URL": database_url, "TASKFINDER_DATA_DIR": tmp_path, "CACHE_DIR": shared_cache_dir,
              "AUTO_FIT": "0"}
    production = ServerProcess(gunicorn_command(), server_env(**common, HOST="127.0.0.1", PORT=gunicorn_port,
                                                              WEB_CONCURRENCY=2, WEB_THREADS=2),
                               tmp_path / "gunicorn.log", gunicorn_port)
    embedded = ServerProcess(waitress_command(waitress_port), server_env(**common), tmp_path / "waitress.log",
                             waitress_port)
    query, gold = "zorblax wagon for the kids", "transport.bus-routes"
    engine = db.make_engine(database_url)
    accounts = AccountStore(engine)
    accounts.create_user("eddie", "a long enough password", "editor", actor="cli:test")
    _info, token = accounts.create_token("eddie", actor="cli:test", label="live reload test")
    production.start()
    embedded.start()
    try:
        production.wait_ready()
        embedded.wait_ready()
        servers = [production.url, embedded.url]
        assert not any(pinned_to(search_body(url, query), gold) for url in servers)

        base_version = admin_get(embedded.url, token, "/versions?limit=1")["versions"][0]["id"]  # the demo load
        admin_api(embedded.url, token, "/cases", {"query": query, "gold": [gold], "rationale": "Slang for the school bus."})
        committed = time.monotonic()
        with ThreadPoolExecutor(len(servers)) as pool:
            seen = list(pool.map(lambda url: seconds_until(url, query, lambda b: pinned_to(b, gold),
                                                           committed + PROPAGATION_DEADLINE_S), servers))
        assert all(seen), f"not seen within {PROPAGATION_DEADLINE_S} s by {[u for u, s in zip(servers, seen) if not s]}"
        sleep_until(committed + PROPAGATION_DEADLINE_S)
        # by the deadline both gunicorn workers have it: fresh connections land on either
        assert all(pinned_to(search_body(production.url, query), gold) for _ in range(12))

        newest = admin_get(embedded.url, token, "/versions?limit=1")["versions"][0]["id"]   # what we reviewed
        admin_api(embedded.url, token, f"/versions/{base_version}/rollback", {"based_on": newest})  # back, the same way
        committed = time.monotonic()
        with ThreadPoolExecutor(len(servers)) as pool:
            seen = list(pool.map(lambda url: seconds_until(url, query, lambda b: not pinned_to(b, gold),
                                                           committed + PROPAGATION_DEADLINE_S), servers))
        assert all(seen), f"rollback not seen within {PROPAGATION_DEADLINE_S} s"
        sleep_until(committed + PROPAGATION_DEADLINE_S)
        assert not any(pinned_to(search_body(production.url, query), gold) for _ in range(12))
    finally:
        production.stop()
        embedded.stop()
        engine.dispose()
    assert "Traceback" not in production.log_tail(100_000) + embedded.log_tail(100_000)

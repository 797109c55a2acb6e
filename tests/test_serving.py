"""Production serving: gunicorn with two worker processes (ops/gunicorn.conf.py), each
answering its own health checks, and /metrics summing the samples of both (prometheus_client's
multiprocess mode) whichever worker answers the scrape.

One real gunicorn in a subprocess, on the demo catalog in a temporary SQLite file, without
embeddings and background fits so that workers start in seconds; the whole module stays well
under 30 s. The helpers of the gunicorn hooks are unit-tested at the end.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra import multiprocess
from infra.metrics import TALLY_FLUSH_S
from ops.servers import free_port, prepare_demo_database
from tests.conftest import migrated_sqlite

pytestmark = pytest.mark.serving

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 20


def get(url: str) -> tuple[int, bytes]:
    """One request on a fresh connection (so that either worker may accept it)."""
    request = urllib.request.Request(url, headers={"Connection": "close"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


def wait_until_up(base_url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"gunicorn exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            get(f"{base_url}/healthz")
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"gunicorn did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, gunicorn's graceful stop; the process group is killed only if that hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def demo_server_env(base: Path, **settings: str) -> dict[str, str]:
    """The environment of a server over the demo catalog in `base` (SQLite, no embeddings, no
    background fit, no LLM, no SECRET_KEY from the caller), the catalog loaded. Loaded here
    (migrated, tasks and cases imported: ops.servers.prepare_demo_database) rather than by
    `app.py load-demo`, which also fits the ranker: without embeddings the shipped fit does not
    apply, and its fit (~10 s) is nothing these tests look at (the servers serve the defaults)."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{base / 'taskfinder.db'}", "TASKFINDER_DATA_DIR": str(base),
           "EMBEDDINGS_ENABLED": "0", "AUTO_FIT": "0", **settings}
    for name in ("LLM_BASE_URL", "EMBEDDINGS_BASE_URL", "SECRET_KEY"):
        env.pop(name, None)
    prepare_demo_database(f"sqlite:///{migrated_sqlite(base / 'taskfinder.db')}")
    return env


@pytest.fixture(scope="module")
def gunicorn_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("serving")
    multiproc_dir = base / "prometheus"
    multiproc_dir.mkdir()
    (multiproc_dir / "counter_999999.db").write_bytes(b"left by an earlier run")  # on_starting must wipe it
    port = free_port()
    env = demo_server_env(base, HOST="127.0.0.1", PORT=str(port), WEB_CONCURRENCY="2", WEB_THREADS="2",
                          PROMETHEUS_MULTIPROC_DIR=str(multiproc_dir))
    log = base / "gunicorn.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py"], cwd=ROOT,
                                   env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base_url, process, log)
        yield base_url, process, multiproc_dir, log
    finally:
        stop(process)


def health_pids_until_two(base_url: str, within_s: float = 30.0) -> tuple[set[int], int]:
    """Send /healthz requests, a few at a time, until two different workers have answered or
    `within_s` has passed; returns their pids and how many requests it took. Which worker accepts
    a connection is the kernel's choice: on a busy machine one worker can win hundreds of accepts
    in a row (or the other is still building its index), so the budget is time, with short pauses
    that let the other worker reach accept()."""
    pids: set[int] = set()
    sent = 0
    deadline = time.monotonic() + within_s
    with ThreadPoolExecutor(max_workers=4) as pool:
        while len(pids) < 2 and time.monotonic() < deadline:
            answers = list(pool.map(lambda _: get(f"{base_url}/healthz"), range(4)))
            sent += len(answers)
            pids |= {json.loads(body)["pid"] for status, body in answers if status == 200}
            time.sleep(0.02)
    return pids, sent


def samples(metrics_text: str) -> list:
    return [s for family in text_string_to_metric_families(metrics_text) for s in family.samples]


@pytest.mark.xdist_group("gunicorn-server")   # one gunicorn (the module's fixture) for both tests
def test_two_workers_answer_and_metrics_sum_over_both(gunicorn_server):
    base_url, process, multiproc_dir, log = gunicorn_server
    pids, sent = health_pids_until_two(base_url)
    assert len(pids) == 2, f"only {pids} answered {sent} requests"
    assert {json.loads(get(f"{base_url}/readyz")[1])["status"]} == {"ready"}
    status, body = get(f"{base_url}/api/search?q=hearing%20and%20vision%20screening")
    assert status == 200 and json.loads(body)["results"]

    # one summed series: both workers' counts (plus the start-up probes of wait_until_up); the
    # worker that does not serve the scrape writes its tallied counts every TALLY_FLUSH_S
    deadline = time.monotonic() + 10 * TALLY_FLUSH_S
    while True:
        all_samples = samples(get(f"{base_url}/metrics")[1].decode())
        healthz = [s for s in all_samples if s.name == "taskfinder_http_requests_total"
                   and s.labels == {"endpoint": "/healthz", "status": "200"}]
        if (healthz and healthz[0].value >= sent) or time.monotonic() > deadline:
            break
        time.sleep(TALLY_FLUSH_S / 5)
    assert len(healthz) == 1 and healthz[0].value >= sent
    searches = [s for s in all_samples if s.name == "taskfinder_stage_seconds_count" and s.labels["stage"] == "total"]
    assert searches and searches[0].value >= 1
    # per-worker gauges keep one series per live worker, labelled with its pid
    index_pids = {int(s.labels["pid"]) for s in all_samples if s.name == "taskfinder_index_tasks" and s.value == 200}
    assert index_pids == pids
    assert not (multiproc_dir / "counter_999999.db").exists()


@pytest.mark.xdist_group("gunicorn-server")
def test_each_worker_counts_in_its_own_file(gunicorn_server):
    """The aggregation is real: two workers, two counter files."""
    base_url, process, multiproc_dir, log = gunicorn_server
    health_pids_until_two(base_url)
    assert len(list(multiproc_dir.glob("counter_*.db"))) == 2


def test_prepare_directory_removes_only_sample_files(tmp_path):
    (tmp_path / "counter_1.db").write_bytes(b"x")
    (tmp_path / "gauge_liveall_1.db").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("keep me")
    assert multiprocess.prepare_directory(tmp_path) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert multiprocess.prepare_directory(tmp_path / "new") == 0 and (tmp_path / "new").is_dir()


def test_worker_exited_drops_only_its_live_gauges(tmp_path):
    for name in ("gauge_liveall_7.db", "gauge_liveall_8.db", "counter_7.db"):
        (tmp_path / name).write_bytes(b"x")
    multiprocess.worker_exited(tmp_path, 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_7.db", "gauge_liveall_8.db"]


def test_scrapes_drop_the_live_gauges_of_processes_that_are_gone(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = int(finished.stdout)
    for name in (f"gauge_liveall_{gone}.db", f"gauge_liveall_{os.getpid()}.db", f"counter_{gone}.db"):
        (tmp_path / name).write_bytes(b"x")
    multiprocess.drop_dead_processes(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"counter_{gone}.db", f"gauge_liveall_{os.getpid()}.db"]


def test_a_sigterm_stop_of_the_embedded_server_writes_the_searches_and_events_it_took(tmp_path):
    """`python app.py serve` (waitress, one process) stopped with SIGTERM, as a service manager
    or the traffic simulator stops it, a moment after a widget's search and events: the queued
    search and both events are in the database, not lost with the process. The flush interval
    is long, so only the shutdown can have written them (before, SIGTERM killed the process
    without running the writer's exit flush)."""
    from sqlalchemy import text

    from catalog import db

    port = free_port()
    env = demo_server_env(tmp_path, RATE_LIMITS="0", ANALYTICS_FLUSH_INTERVAL_S="600")
    log = tmp_path / "waitress.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "app.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
                                   cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base_url, process, log)
        session = "sigterm-test-session-0001"
        _, body = get(f"{base_url}/api/search?q=lead+screening&k=5&session={session}")
        found = json.loads(body)
        shown = [row["id"] for row in found["results"]]
        payload = {"session_id": session, "events": [
            {"type": "impression", "search_id": found["search_id"], "query": "lead screening", "task_ids": shown},
            {"type": "click", "search_id": found["search_id"], "task_id": shown[0], "position": 1}]}
        request = urllib.request.Request(f"{base_url}/api/events", data=json.dumps(payload).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "Connection": "close"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 202
    finally:
        stop(process)
    assert process.returncode == 0, log.read_text()[-3000:]
    engine = db.make_engine(env["DATABASE_URL"])
    with engine.connect() as connection:
        searches = connection.execute(text("SELECT count(*) FROM search_log WHERE session_id = :s"),
                                      {"s": session}).scalar()
        events = connection.execute(text("SELECT type FROM search_events WHERE session_id = :s ORDER BY type"),
                                    {"s": session}).scalars().all()
    engine.dispose()
    assert (searches, events) == (1, ["click", "impression"])

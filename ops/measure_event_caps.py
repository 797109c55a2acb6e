"""Do the event caps hold across gunicorn workers? (issue 33 items 3 and 4)

    python ops/measure_event_caps.py [--workers 1,4] [--seconds 12] [--clients 8]

For each worker count, a real server (gunicorn, ops/gunicorn.conf.py) over a fresh PostgreSQL
database and Redis (127.0.0.1:5432 trust, 127.0.0.1:6379, as on every machine of this project),
flooded by `--clients` keep-alive connections (so the posts spread over the workers) for
`--seconds`, twice:

* one session: every post carries the same `session_id` (the per-session cap,
  ANALYTICS_SESSION_EVENTS_PER_MINUTE);
* no session, one address: posts without a `session_id` (the per-address cap,
  ANALYTICS_ADDRESS_EVENTS_PER_MINUTE);

each post 10 click events. Counted: events accepted (the 202 answers' `accepted`), posts refused
with 429, and the rows the server stored (search_events, after a SIGTERM flushed the writers).
The caps are moving 60-second windows in Redis, shared by every worker (analytics/budget.py),
so a run shorter than a minute accepts at most one cap's worth; each run still starts after a
minute's boundary, in case a deployment sets fixed windows. The audit measured, before the caps were shared: one session 100 a
minute on one process, 250 on 2 workers, 400 on 4; one address without a session 19,900 a
minute. Prints a table and, with --json, the figures.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
REDIS = "redis://127.0.0.1:6379/0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_database() -> str:
    """A fresh, empty PostgreSQL database (dropped by drop_database)."""
    import psycopg

    name = "caps_" + uuid.uuid4().hex[:10]
    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=test", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stored_events(name: str) -> int:
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port=5432 user=postgres dbname={name}") as conn:
        return conn.execute("SELECT count(*) FROM search_events").fetchone()[0]


class Server:
    """gunicorn with `workers` workers over database `name`, Redis under a fresh key prefix."""

    def __init__(self, workers: int, name: str, work: Path):
        self.port = free_port()
        self.env = {**os.environ, "DATABASE_URL": PG.format(name=name), "REDIS_URL": REDIS,
                    "REDIS_KEY_PREFIX": f"caps-{uuid.uuid4().hex[:8]}:", "SECRET_KEY": "c" * 48,
                    "TASKFINDER_DATA_DIR": str(work), "EMBEDDINGS_ENABLED": "0", "HOST": "127.0.0.1",
                    "PORT": str(self.port), "WEB_CONCURRENCY": str(workers), "WEB_THREADS": "4",
                    "PROMETHEUS_MULTIPROC_DIR": str(work / "prom"), "LLM_BASE_URL": ""}
        (work / "prom").mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "app.py", "db", "upgrade"], cwd=ROOT, env=self.env, check=True,
                       capture_output=True)
        self.process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py"], cwd=ROOT,
                                        env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)   # the workers flush their analytics writers
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def flood(port: int, seconds: float, clients: int, session: str | None) -> dict:
    """`clients` keep-alive connections posting 10 clicks at a time for `seconds`."""
    totals = {"posts": 0, "accepted": 0, "refused_429": 0, "other": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        sent = 0
        while time.monotonic() < stop_at:
            body = {"events": [{"type": "click", "search_id": "E" * 22, "task_id": f"t.{k}.{sent}.{i}", "position": 1}
                               for i in range(10)]}
            if session is not None:
                body["session_id"] = session
            conn.request("POST", "/api/events", json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            payload = response.read()
            sent += 1
            with lock:
                totals["posts"] += 1
                if response.status == 202:
                    totals["accepted"] += json.loads(payload)["accepted"]
                elif response.status == 429:
                    totals["refused_429"] += 1
                else:
                    totals["other"] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return totals


def after_minute_boundary(margin_s: float, seconds: float) -> None:
    """Sleep until a run of `seconds` fits inside the current minute's window."""
    into = time.time() % 60
    if into + seconds + margin_s > 60:
        time.sleep(60 - into + 0.5)


def measure(workers: int, seconds: float, clients: int) -> list[dict]:
    rows = []
    for kind in ("one session", "no session, one address"):
        name = create_database()
        with tempfile.TemporaryDirectory(prefix="taskfinder-caps-") as work:
            server = Server(workers, name, Path(work))
            try:
                after_minute_boundary(1.0, seconds)
                totals = flood(server.port, seconds, clients, "flooder-session-0001" if kind == "one session" else None)
            finally:
                server.stop()
            totals.update(workers=workers, traffic=kind, stored=stored_events(name))
        drop_database(name)
        rows.append(totals)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [row for n in args.workers.split(",") for row in measure(int(n), args.seconds, args.clients)]
    print("| workers | traffic | posts | events accepted | posts refused (429) | events stored |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workers']} | {r['traffic']} | {r['posts']} | {r['accepted']} | {r['refused_429']} | {r['stored']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Real Taskfinder server processes on loopback, for the load test (ops/loadtest.py), the
live-reload benchmark (ops/bench_live_reload.py) and its test (tests/test_live_reload.py).

    with ServerProcess(gunicorn_command(), env, log_path) as server:   # waits for /readyz
        http_get(server.url + "/api/search?q=lead")

`prepare_demo_database(url)` migrates a database and loads the demo catalog and cases into it;
`warm_embedding_cache(url, cache_dir)` embeds them once, before the servers start.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Settings a test or benchmark server must not inherit from the caller's environment.
UNSHARED_VARIABLES = ("LLM_BASE_URL", "EMBEDDINGS_BASE_URL", "SECRET_KEY", "PROMETHEUS_MULTIPROC_DIR",
                      "DATABASE_URL", "TASKFINDER_DATA_DIR", "CACHE_DIR", "HOST", "PORT", "REDIS_URL")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(**overrides) -> dict[str, str]:
    """This process's environment without the Taskfinder settings a server must get explicitly,
    plus `overrides` (stringified). Rate limits are off unless overridden: every client of a
    benchmark or test comes from 127.0.0.1, so the per-client limit would measure itself."""
    env = {k: v for k, v in os.environ.items() if k not in UNSHARED_VARIABLES}
    return {**env, "RATE_LIMITS": "0", **{k: str(v) for k, v in overrides.items()}}


def gunicorn_command() -> list[str]:
    """The production command (`make serve-prod` without its migration step)."""
    return [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py"]


def waitress_command(port: int) -> list[str]:
    """The embedded default: one waitress process (`python app.py serve`)."""
    return [sys.executable, "app.py", "serve", "--host", "127.0.0.1", "--port", str(port)]


def http_get(url: str, timeout_s: float = 10.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One GET on a fresh connection (so that any gunicorn worker may accept it); HTTP errors
    are returned, not raised."""
    request = urllib.request.Request(url, headers={"Connection": "close", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def prepare_demo_database(url: str) -> None:
    """Migrate the database at `url` and load the demo catalog and test cases into it."""
    sys.path.insert(0, str(ROOT))
    from catalog import db
    from catalog.demo import DEMO_CASES, DEMO_CATALOG
    from catalog.formats import load_cases_file, load_tasks_file
    from catalog.store import CatalogStore

    engine = db.make_engine(url)
    try:
        db.upgrade(engine)
        store = CatalogStore(engine)
        tasks = load_tasks_file(DEMO_CATALOG)
        store.import_tasks(tasks, replace=True)
        store.import_cases(load_cases_file(DEMO_CASES, {t.id for t in tasks}), replace=True)
    finally:
        engine.dispose()


def warm_embedding_cache(url: str, cache_dir: Path) -> float:
    """Build the search index of the database at `url` once in this process, so that every task
    and exemplar embedding is in `cache_dir` before servers start (they would otherwise each
    embed the whole catalog at once). Returns the seconds it took."""
    sys.path.insert(0, str(ROOT))
    from app import create_app
    from settings import Settings

    started = time.perf_counter()
    settings = Settings.from_env({"DATABASE_URL": url, "CACHE_DIR": str(cache_dir), "AUTO_FIT": "0",
                                  "TASKFINDER_DATA_DIR": str(cache_dir.parent)})
    app = create_app(settings)
    services = app.extensions["taskfinder"]
    services.search.live(wait=True)
    services.search.close()
    services.store.engine.dispose()
    return time.perf_counter() - started


class ServerProcess:
    """A server command in its own process group, output to `log_path`; entering waits until
    GET /readyz answers 200 (an index is built), leaving stops it (SIGTERM, then SIGKILL)."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path, port: int,
                 start_timeout_s: float = 120.0):
        self.command, self.env, self.log_path, self.port = command, env, log_path, port
        self.start_timeout_s = start_timeout_s
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "ServerProcess":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def start(self) -> None:
        with self.log_path.open("ab") as output:
            self.process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def wait_ready(self) -> dict:
        """Poll /readyz until it answers 200; RuntimeError (with the log's tail) if the process
        exits or the time runs out."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.command} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                status, body = http_get(f"{self.url}/readyz", timeout_s=5)
                if status == 200:
                    return json.loads(body)
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.command} not ready within {self.start_timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM to the process group (a graceful stop for gunicorn and waitress); SIGKILL if
        it hangs."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        except ProcessLookupError:
            pass

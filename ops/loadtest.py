"""Load test of the production command, with the HTTP stack's own ceiling measured in the same run.

    python ops/loadtest.py                       # ~2.5 minutes; prints a table, --json FILE keeps it
    python ops/loadtest.py --profile out/        # the same, with py-spy profiles of both workers

What it does, all on loopback:
1. loads the demo catalog into a temporary SQLite file (or --database-url), embeds it once into
   --cache-dir and copies that cache for the run (so query embeddings start cold every run);
2. starts an OpenAI-compatible LLM stub answering after 300-800 ms (--llm-latency-ms);
3. starts the production server, gunicorn -c ops/gunicorn.conf.py (`make serve-prod`), with
   WEB_CONCURRENCY=2 (--workers) and the Prometheus multiprocess directory, plus any --env K=V
   (rate limits are off: every client is 127.0.0.1; --env RATE_LIMITS=1 measures them); and, beside it, the ceiling: a bare Flask app answering
   the same body canned (ops/canned_app.py) under the same gunicorn, worker class and counts;
4. runs closed-loop clients (keep-alive http.client connections, threads in --processes client
   processes) in phases of --duration seconds, the first --warmup seconds not counted:
     ceiling            the canned app, --clients clients
     typeahead_hot      rerank=0, a fixed set of 60 prefixes repeated (query embeddings cached)
     (ceiling and typeahead_hot alternate --rounds times, after --settle s of unmeasured load on
     each; the ratio is taken per round)
     typeahead_distinct rerank=0, every request a prefix never sent before (embedding computed)
     mixed              at once: hot and distinct type-ahead, full searches (rerank=1; half from
                        10 repeated queries, so LLM-cache hits, half new), event posts
                        (POST /api/events, when the app has that route) and an admin edit (a
                        test-case save through the store, then its deletion) every --edit-every s;
5. reports per kind: requests, req/s, p50/p95/p99 latency, errors; the embedding-cache hit
   ratio and re-rank outcomes from the server's /metrics; the load average before each phase;
   per phase the server's CPU time per request (gunicorn master and workers, from /proc), and
   the ceiling ratio both ways: hot type-ahead req/s over the ceiling's, and the ceiling's CPU
   per request over hot type-ahead's (steadier when the clients share the server's cores).

The per-client rate limits are off in the server under test (ops/servers.server_env): every
client is 127.0.0.1, and the load test measures capacity, not the limiter (`--env RATE_LIMITS=1`
turns them on).
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.cache import copy_cache  # noqa: E402
from infra.metrics import TALLY_FLUSH_S  # noqa: E402
from ops.servers import (ServerProcess, free_port, gunicorn_command, http_get, prepare_demo_database,  # noqa: E402
                         server_env, warm_embedding_cache)

HOT_PREFIXES = 60
HOT_FULL_QUERIES = 10
CHECKED_KINDS = ("full_search",)   # kinds whose response body is parsed (re-rank outcome)


# -- what the clients send -------------------------------------------------------------------
@dataclass(frozen=True)
class Pools:
    """Query texts, drawn from the demo catalog and test cases."""
    hot_prefixes: list[str]
    distinct_prefixes: list[str]
    hot_full: list[str]
    cold_full: list[str]
    task_ids: list[str]


def build_pools(seed: int) -> Pools:
    """Type-ahead prefixes (3 characters and more, of test-case queries and task names) split
    into a small hot set and a large pool of distinct ones; full queries are test-case queries
    without their first word (so that no test case pins them), 10 of them repeated."""
    from catalog.demo import DEMO_CASES, DEMO_CATALOG
    from catalog.formats import load_cases_file, load_tasks_file

    rng = random.Random(seed)
    tasks = load_tasks_file(DEMO_CATALOG)
    cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
    texts = [c.query for c in cases] + [t.name for t in tasks] + [a for t in tasks for a in t.aliases]
    prefixes = sorted({text[:n].strip().lower() for text in texts for n in range(3, len(text) + 1)} - {""})
    rng.shuffle(prefixes)
    full = sorted({" ".join(c.query.split()[1:]) for c in cases if len(c.query.split()) >= 3})
    rng.shuffle(full)
    return Pools(prefixes[:HOT_PREFIXES], prefixes[HOT_PREFIXES:], full[:HOT_FULL_QUERIES],
                 full[HOT_FULL_QUERIES:], [t.id for t in tasks])


def search_path(query: str, rerank: bool) -> str:
    return "/api/search?" + urllib.parse.urlencode({"q": query, "rerank": int(rerank)})


class Requests:
    """The requests of one client thread of one kind: `next()` -> (method, path, body)."""

    def __init__(self, kind: str, pools: Pools, index: int, count: int, seed: int, part: int = 0):
        self.kind, self.pools, self.rng = kind, pools, random.Random(seed * 1000 + index)
        # disjoint between threads, and between the two phases that send distinct prefixes
        half = len(pools.distinct_prefixes) // 2
        self.distinct = pools.distinct_prefixes[part * half:(part + 1) * half][index::count]
        self.cold_full = pools.cold_full[index::count]
        self.position = self.cold_position = 0
        self.wrapped = 0   # distinct pools used up and restarted (then they are repeats)

    def _next_distinct(self) -> str:
        if self.position >= len(self.distinct):
            self.position, self.wrapped = 0, self.wrapped + 1
        self.position += 1
        return self.distinct[self.position - 1]

    def next(self) -> tuple[str, str, bytes | None]:
        kind, rng = self.kind, self.rng
        if kind in ("typeahead_hot", "ceiling"):
            return "GET", search_path(rng.choice(self.pools.hot_prefixes), False), None
        if kind == "typeahead_distinct":
            return "GET", search_path(self._next_distinct(), False), None
        if kind == "full_search":
            if rng.random() < 0.5 or not self.cold_full:
                query = rng.choice(self.pools.hot_full)
            else:
                query = self.cold_full[self.cold_position % len(self.cold_full)]
                self.cold_position += 1
            return "GET", search_path(query, True), None
        if kind == "event":
            return "POST", "/api/events", json.dumps(self.event_batch()).encode()
        raise ValueError(kind)

    def event_batch(self) -> dict:
        """An impression and a click of one search, as the search box would send them."""
        rng = self.rng
        search_id = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
        shown = rng.sample(self.pools.task_ids, 5)
        return {"session_id": f"loadtest-{self.rng.randrange(10**9)}",
                "events": [{"type": "impression", "search_id": search_id, "query": rng.choice(self.pools.hot_full),
                            "task_ids": shown},
                           {"type": "click", "search_id": search_id, "task_id": shown[0], "position": 1}]}


def rerank_outcome(body: bytes) -> str:
    """What happened to a full search's re-rank: llm, llm_cache_hit, or why it was skipped."""
    info = json.loads(body)["rerank"]
    if info.get("applied"):
        return "llm_cache_hit" if info.get("cached") else "llm"
    return f"skipped:{info.get('skipped') or 'degraded'}"


# -- the client processes --------------------------------------------------------------------
@dataclass
class KindResult:
    latencies: list[float] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    wrapped: int = 0

    def merge(self, other: "KindResult") -> None:
        self.latencies += other.latencies
        self.errors.update(other.errors)
        self.outcomes.update(other.outcomes)
        self.wrapped += other.wrapped


def client_thread(port: int, requests: Requests, measure_from: float, end: float, result: KindResult) -> None:
    """Send requests back to back on one keep-alive connection until `end`; record those
    started after `measure_from`."""
    expected = 202 if requests.kind == "event" else 200
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    while True:
        started = time.time()
        if started >= end:
            break
        method, path, body = requests.next()
        try:
            connection.request(method, path, body=body, headers=headers if body else {})
            response = connection.getresponse()
            payload = response.read()
            status = response.status
            error = None if status == expected else f"HTTP {status}"
            if error is None and requests.kind in CHECKED_KINDS:
                result.outcomes[rerank_outcome(payload)] += 1
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
        except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
            error = type(exc).__name__
            connection.close()
        if started >= measure_from:
            result.latencies.append(time.time() - started)
            if error:
                result.errors[error] += 1
    connection.close()
    result.wrapped = requests.wrapped


def client_process(port: int, assignments: list[tuple[str, int, int]], pools: Pools, seed: int, part: int,
                   measure_from: float, end: float, queue) -> None:
    """Run one thread per (kind, index, count) assignment; put {kind: KindResult} on `queue`."""
    results = {kind: KindResult() for kind, _i, _n in assignments}
    per_thread = []
    threads = []
    for kind, index, count in assignments:
        result = KindResult()
        per_thread.append((kind, result))
        threads.append(threading.Thread(target=client_thread, args=(
            port, Requests(kind, pools, index, count, seed, part), measure_from, end, result)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for kind, result in per_thread:
        results[kind].merge(result)
    queue.put(results)


def run_clients(port: int, clients: dict[str, int], pools: Pools, seed: int, processes: int, duration: float,
                warmup: float, part: int = 0) -> dict[str, KindResult]:
    """Closed-loop clients, `clients[kind]` threads per kind spread over `processes` processes;
    `part` picks the half of the distinct prefixes they send."""
    assignments: list[list[tuple[str, int, int]]] = [[] for _ in range(processes)]
    slot = 0
    for kind, count in clients.items():
        for index in range(count):
            assignments[slot % processes].append((kind, index, count))
            slot += 1
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = time.time() + 0.5
    workers = [context.Process(target=client_process, args=(port, a, pools, seed, part, start + warmup,
                                                            start + duration, queue)) for a in assignments if a]
    for worker in workers:
        worker.start()
    merged: dict[str, KindResult] = {kind: KindResult() for kind in clients}
    for _ in workers:
        for kind, result in queue.get(timeout=duration + 120).items():
            merged[kind].merge(result)
    for worker in workers:
        worker.join(30)
    return merged


# -- admin edits -----------------------------------------------------------------------------
class AdminEditor:
    """Every `every_s` seconds, a test-case save through CatalogStore (the code behind every
    admin write), alternately adding a case and deleting it; each write moves the store revision,
    so every worker rebuilds its index in the background while serving."""

    def __init__(self, database_url: str, every_s: float):
        from catalog import db
        from catalog.store import CatalogStore

        self.engine = db.make_engine(database_url)
        self.store = CatalogStore(engine=self.engine)
        self.every_s = every_s
        self.result = KindResult()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="admin-editor", daemon=True)

    def __enter__(self) -> "AdminEditor":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(30)
        self.engine.dispose()

    def _run(self) -> None:
        from catalog.records import CaseRecord

        added = None
        number = 0
        while not self._stop.wait(self.every_s):
            started = time.time()
            try:
                if added is None:
                    number += 1
                    added = self.store.add_case(CaseRecord(query=f"loadtest edit {os.getpid()} {number}",
                                                           gold=("transport.bus-routes",), rationale="load test"))
                else:
                    self.store.delete_case(added.id, added.version)
                    added = None
                self.result.latencies.append(time.time() - started)
            except Exception as exc:  # counted and reported, never fatal to the run
                self.result.errors[type(exc).__name__] += 1


# -- server-side figures ---------------------------------------------------------------------
def scrape(base_url: str) -> dict[tuple[str, tuple], float]:
    """The server's /metrics (summed over workers) as {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    _status, body = http_get(f"{base_url}/metrics")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def metric_delta(before: dict, after: dict, name: str, **labels) -> float:
    def total(snapshot):
        return sum(v for (n, ls), v in snapshot.items() if n == name and labels.items() <= dict(ls).items())
    return total(after) - total(before)


def server_figures(before: dict, after: dict) -> dict:
    hits = metric_delta(before, after, "taskfinder_embedding_cache_lookups_total", result="hit")
    misses = metric_delta(before, after, "taskfinder_embedding_cache_lookups_total", result="miss")
    answer_hits = metric_delta(before, after, "taskfinder_answer_cache_lookups_total", result="hit")
    answer_misses = metric_delta(before, after, "taskfinder_answer_cache_lookups_total", result="miss")
    return {"embedding_cache_hit_ratio": round(hits / (hits + misses), 3) if hits + misses else None,
            "answer_cache_hit_ratio": round(answer_hits / (answer_hits + answer_misses), 3)
            if answer_hits + answer_misses else None,
            "http_5xx": sum(metric_delta(before, after, "taskfinder_http_requests_total", status=str(code))
                            for code in (500, 502, 503, 504)),
            "index_rebuilds": metric_delta(before, after, "taskfinder_index_rebuilds_total")}


# -- reporting -------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def kind_row(kind: str, clients: int, result: KindResult, seconds: float) -> dict:
    lat = result.latencies
    row = {"kind": kind, "clients": clients, "requests": len(lat),
           "req_s": round(len(lat) / seconds, 1) if seconds else None,
           "p50_ms": round(percentile(lat, 0.50) * 1000, 1) if lat else None,
           "p95_ms": round(percentile(lat, 0.95) * 1000, 1) if lat else None,
           "p99_ms": round(percentile(lat, 0.99) * 1000, 1) if lat else None,
           "errors": sum(result.errors.values()), "error_kinds": dict(result.errors)}
    if result.outcomes:
        row["outcomes"] = dict(result.outcomes)
    if result.wrapped:
        row["distinct_pool_wrapped"] = result.wrapped
    return row


def markdown_table(rows: list[dict]) -> str:
    lines = ["| phase | kind | clients | requests | req/s | p50 ms | p95 ms | p99 ms | errors |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['phase']} | {r['kind']} | {r['clients']} | {r['requests']} | {r['req_s']} | "
                     f"{r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['errors']} |")
    return "\n".join(lines)


# -- profiling -------------------------------------------------------------------------------
def process_tree_cpu_s(master_pid: int) -> float:
    """CPU seconds (user + system) the process `master_pid` and its children have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [master_pid, *worker_pids(master_pid)]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:   # a worker that just exited
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks   # utime, stime (fields 14 and 15 of stat)
    return total


class CpuWindow:
    """The server's CPU seconds over a phase's measured window (readings taken by timers at the
    window's start and end), so that a phase reports CPU time per request: a steadier figure
    than requests per second on a machine whose clients share its cores."""

    def __init__(self, master_pid: int, starts_in_s: float, ends_in_s: float):
        self.readings: list[float] = []
        self._timers = [threading.Timer(delay, lambda: self.readings.append(process_tree_cpu_s(master_pid)))
                        for delay in (starts_in_s, ends_in_s)]
        for timer in self._timers:
            timer.start()

    def seconds(self) -> float | None:
        for timer in self._timers:
            timer.join()
        return self.readings[1] - self.readings[0] if len(self.readings) == 2 else None


def worker_pids(master_pid: int) -> list[int]:
    """The gunicorn workers: the master's child processes."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def start_profilers(pids: list[int], out_dir: Path, phase: str, seconds: float) -> list[subprocess.Popen]:
    """py-spy (pip install py-spy) sampling each worker for `seconds`, collapsed stacks of the
    thread holding the GIL only: where the Python CPU time goes (waiting threads are left out)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return [subprocess.Popen([py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "250",
                              "--gil", "--format", "raw", "--nonblocking", "--output", str(out_dir / f"{phase}-{pid}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for pid in pids]


def summarise_profile(files: list[Path], top: int = 25) -> str:
    """Inclusive and self share of samples per function (file:function), over all `files`
    (py-spy's collapsed format: `frame;frame;... count`)."""
    inclusive: Counter = Counter()
    own: Counter = Counter()
    total = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
                      for f in stack.split(";")]
            n = int(count)
            total += n
            for frame in set(frames):
                inclusive[frame] += n
            own[frames[-1]] += n
    if not total:
        return "no samples\n"
    lines = [f"{total} busy samples", "", "inclusive %  function"]
    lines += [f"{100 * n / total:10.1f}  {name}" for name, n in inclusive.most_common(top)]
    lines += ["", "self %      function"]
    lines += [f"{100 * n / total:10.1f}  {name}" for name, n in own.most_common(top)]
    return "\n".join(lines) + "\n"


# -- the run ---------------------------------------------------------------------------------
def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--env {pair!r}: expected NAME=VALUE")
        env[name] = value
    return env


def phase(label: str, server: ServerProcess, clients: dict[str, int], args, pools: Pools, metrics_url: str | None,
          rows: list[dict], profile: tuple[list[int], Path] | None = None, editor_url: str | None = None) -> dict:
    port = server.port
    load = os.getloadavg()
    before = scrape(metrics_url) if metrics_url else None
    profilers = start_profilers(profile[0], profile[1], label, args.duration) if profile else []
    seconds = args.duration - args.warmup
    cpu = CpuWindow(server.process.pid, 0.5 + args.warmup, 0.5 + args.duration)   # run_clients starts in 0.5 s
    if editor_url:
        with AdminEditor(editor_url, args.edit_every) as editor:
            results = run_clients(port, clients, pools, args.seed, args.processes, args.duration, args.warmup, part=1)
        results["admin_edit"] = editor.result
        clients = {**clients, "admin_edit": 1}
    else:
        results = run_clients(port, clients, pools, args.seed, args.processes, args.duration, args.warmup)
    for profiler in profilers:
        profiler.wait(60)
    cpu_s = cpu.seconds()
    requests = sum(len(result.latencies) for result in results.values())
    summary = {"phase": label, "load_average_1m": round(load[0], 2), "kinds": {},
               "server_cpu_us_per_request": round(cpu_s / requests * 1e6, 1) if cpu_s is not None and requests else None}
    for kind, result in results.items():
        row = {"phase": label, **kind_row(kind, clients[kind], result, seconds)}
        rows.append(row)
        summary["kinds"][kind] = row
    if metrics_url:
        time.sleep(2 * TALLY_FLUSH_S)   # every worker has written its tallied counts (infra.metrics.Tally)
        summary["server"] = server_figures(before, scrape(metrics_url))
    print(f"  {label}: load {load[0]:.2f}; " + "; ".join(
        f"{k} {r['req_s']} req/s p50 {r['p50_ms']} ms p95 {r['p95_ms']} ms errors {r['errors']}"
        for k, r in summary["kinds"].items()) + f"; server CPU {summary['server_cpu_us_per_request']} µs/request" + (f"; {summary['server']}" if metrics_url else ""), file=sys.stderr)
    return summary


def events_route_present(base_url: str) -> bool:
    """Whether the app under test has POST /api/events (404 when it does not)."""
    request = urllib.request.Request(f"{base_url}/api/events", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json", "Connection": "close"})
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc.code != 404
    return True


def main() -> None:
    from settings import Settings
    from ops.llm_fault_server import FaultLLMServer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per phase")
    parser.add_argument("--warmup", type=float, default=3.0, help="first seconds of each phase not counted")
    parser.add_argument("--rounds", type=int, default=2, help="ceiling / hot type-ahead alternations")
    parser.add_argument("--clients", type=int, default=8, help="clients of the type-ahead and ceiling phases")
    parser.add_argument("--processes", type=int, default=2, help="client processes")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (WEB_CONCURRENCY)")
    parser.add_argument("--threads", type=int, default=Settings().web_threads, help="threads per worker")
    parser.add_argument("--llm-latency-ms", default="300-800", help="the LLM stub's latency range")
    parser.add_argument("--edit-every", type=float, default=5.0, help="seconds between admin edits (mixed)")
    parser.add_argument("--database-url", help="default: a temporary SQLite file (its data is replaced!)")
    parser.add_argument("--cache-dir", type=Path, default=Settings.from_env().cache_dir,
                        help="embedding cache to warm and copy (default: CACHE_DIR)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment of the server (repeatable)")
    parser.add_argument("--profile", type=Path, help="write py-spy profiles of the workers here")
    parser.add_argument("--phases", default="ceiling,typeahead_hot,typeahead_distinct,mixed")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of unmeasured load on each server before the first round")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    low, _, high = args.llm_latency_ms.partition("-")
    latency = (float(low) / 1000, float(high or low) / 1000)
    wanted = set(args.phases.split(","))

    workdir = Path(tempfile.mkdtemp(prefix="taskfinder-load-"))
    url = args.database_url or f"sqlite:///{workdir / 'load.db'}"
    prepare_demo_database(url)
    warm_s = warm_embedding_cache(url, args.cache_dir)
    copy_cache(Path(args.cache_dir), workdir / "cache")   # through SQLite: the cache is open here (infra.cache)
    print(f"catalog embedded in {warm_s:.1f} s; run directory {workdir}", file=sys.stderr)
    pools = build_pools(args.seed)

    class StubLLM(FaultLLMServer):
        """Answers like a model, after a realistic delay."""

        def _respond(self, body):
            time.sleep(random.uniform(*latency))
            return super()._respond(body)

    port, canned_port = free_port(), free_port()
    (workdir / "prometheus").mkdir()
    with StubLLM("ok") as llm:
        env = server_env(DATABASE_URL=url, TASKFINDER_DATA_DIR=workdir, CACHE_DIR=workdir / "cache",
                         HOST="127.0.0.1", PORT=port, WEB_CONCURRENCY=args.workers, WEB_THREADS=args.threads,
                         PROMETHEUS_MULTIPROC_DIR=workdir / "prometheus", LLM_BASE_URL=llm.base_url,
                         LLM_MODEL="stub", AUTO_FIT="0", **parse_env(args.env))
        app = ServerProcess(gunicorn_command(), env, workdir / "gunicorn.log", port)
        with app:
            base = app.url
            warm_hot_prefixes(base, pools)
            _status, sample = http_get(base + search_path(pools.hot_prefixes[0], False))
            (workdir / "canned.json").write_bytes(sample)
            canned_cmd = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", str(args.workers),
                          "--threads", str(args.threads), "--bind", f"127.0.0.1:{canned_port}",
                          "--chdir", str(ROOT), "ops.canned_app:create_canned_app()"]
            canned = ServerProcess(canned_cmd, server_env(CANNED_BODY_PATH=workdir / "canned.json"),
                                   workdir / "canned.log", canned_port)
            canned.start()
            wait_for_search(canned)
            profile = (worker_pids(app.process.pid), args.profile) if args.profile else None
            rows: list[dict] = []
            phases: list[dict] = []
            try:
                if args.settle > 0 and {"ceiling", "typeahead_hot"} & wanted:
                    settle(((canned_port, "ceiling"), (port, "typeahead_hot")), args, pools)
                for round_number in range(1, args.rounds + 1):
                    if "ceiling" in wanted:
                        phases.append(phase(f"ceiling#{round_number}", canned, {"ceiling": args.clients},
                                            args, pools, None, rows))
                    if "typeahead_hot" in wanted:
                        phases.append(phase(f"typeahead_hot#{round_number}", app, {"typeahead_hot": args.clients},
                                            args, pools, base, rows, profile))
                canned.stop()
                if "typeahead_distinct" in wanted:
                    phases.append(phase("typeahead_distinct", app, {"typeahead_distinct": args.clients}, args, pools,
                                        base, rows, profile))
                events = events_route_present(base)
                if "mixed" in wanted:
                    mix = {"typeahead_hot": 4, "typeahead_distinct": 2, "full_search": 4, **({"event": 1} if events else {})}
                    phases.append(phase("mixed", app, mix, args, pools, base, rows, profile, editor_url=url))
            finally:
                canned.stop()
        gunicorn_errors = app.log_tail(1_000_000).count("Traceback")

    report = {"command": " ".join(sys.argv), "workers": args.workers, "threads": args.threads,
              "clients": args.clients, "duration_s": args.duration, "warmup_s": args.warmup,
              "llm_latency_ms": args.llm_latency_ms, "events_route": events, "server_tracebacks": gunicorn_errors,
              "ceiling_ratio": ceiling_ratios(phases), "phases": phases}
    if args.profile:
        report["profile_summaries"] = []
        for label in ("typeahead_hot", "typeahead_distinct", "mixed"):
            files = sorted(args.profile.glob(f"{label}*-*.txt"))
            if files:
                (args.profile / f"summary-{label}.txt").write_text(summarise_profile(files))
                report["profile_summaries"].append(str(args.profile / f"summary-{label}.txt"))
    print(markdown_table(rows))
    print(json.dumps({k: v for k, v in report.items() if k != "phases"}, indent=2))
    if not events:
        print("note: the app under test has no POST /api/events; the event kind was skipped", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def settle(targets, args, pools: Pools) -> None:
    """Unmeasured load on each (port, kind) before the rounds, so that the first round does not
    measure a server still settling (the worker that did not answer /readyz finishing its start,
    first-request code paths): without it the first ceiling round ran at about half speed."""
    for port, kind in targets:
        run_clients(port, {kind: args.clients}, pools, args.seed, args.processes, args.settle, args.settle)
        print(f"  settled {kind} ({args.settle:.0f} s, not measured)", file=sys.stderr)


def warm_hot_prefixes(base_url: str, pools: Pools) -> None:
    """Send every hot prefix a few times, so that "hot" means what it says: the query embeddings
    are in the (shared) cache before the first measured request."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda q: http_get(base_url + search_path(q, False)), pools.hot_prefixes * 3))


def wait_for_search(server: ServerProcess, timeout_s: float = 60.0) -> None:
    """The canned app has no /readyz: wait for its /api/search."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if http_get(server.url + "/api/search")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the canned app did not start:\n{server.log_tail()}")


def ceiling_ratios(phases: list[dict]) -> dict:
    """Hot type-ahead req/s over the ceiling's, per round (adjacent phases) and their median;
    beside them, each phase's server CPU per request and the median of their ratio
    (ceiling CPU / hot type-ahead CPU: 1.0 when a search costs the server no more than a canned body)."""
    ceilings = [p for p in phases if "ceiling" in p["kinds"]]
    hot = [p for p in phases if p["phase"].startswith("typeahead_hot#")]
    ratios = [round(h["kinds"]["typeahead_hot"]["req_s"] / c["kinds"]["ceiling"]["req_s"], 3)
              for h, c in zip(hot, ceilings) if c["kinds"]["ceiling"]["req_s"]]
    cpu_ratios = [round(c["server_cpu_us_per_request"] / h["server_cpu_us_per_request"], 3)
                  for h, c in zip(hot, ceilings) if c["server_cpu_us_per_request"] and h["server_cpu_us_per_request"]]
    return {"ceiling_req_s": [c["kinds"]["ceiling"]["req_s"] for c in ceilings],
            "typeahead_hot_req_s": [h["kinds"]["typeahead_hot"]["req_s"] for h in hot], "per_round": ratios,
            "median": round(statistics.median(ratios), 3) if ratios else None,
            "ceiling_cpu_us_per_request": [c["server_cpu_us_per_request"] for c in ceilings],
            "typeahead_hot_cpu_us_per_request": [h["server_cpu_us_per_request"] for h in hot],
            "cpu_per_round": cpu_ratios,
            "cpu_median": round(statistics.median(cpu_ratios), 3) if cpu_ratios else None}


if __name__ == "__main__":
    main()

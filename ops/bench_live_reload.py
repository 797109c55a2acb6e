"""Benchmark: how long a published edit takes to reach other serving processes.

    python ops/bench_live_reload.py [--edits 10] [--database-url URL] [--json FILE]

Starts two real servers on loopback sharing one database (a temporary SQLite file unless
--database-url names another, e.g. a PostgreSQL database you can wipe): gunicorn with two
workers (the production command, ops/gunicorn.conf.py) and `python app.py serve` (waitress).
Then, N times, this process saves a new test case through the store (its query pinned to a task)
and polls both servers' /api/search answer to that query every 10 ms until it shows the edit.
Reports, per server, the median / p95 / max time from the commit to the first changed answer,
and the mean index rebuild duration from the servers' own /metrics. With REVISION_POLL_S=0.5
the expected median is about half the poll interval plus one rebuild.

Embeddings are cached in --cache-dir (default: the Settings' CACHE_DIR), warmed once first.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from catalog import db  # noqa: E402
from catalog.records import CaseRecord  # noqa: E402
from catalog.store import CatalogStore  # noqa: E402
from ops.servers import (ServerProcess, free_port, gunicorn_command, http_get, prepare_demo_database,  # noqa: E402
                         server_env, waitress_command, warm_embedding_cache)
from settings import Settings  # noqa: E402

GOLD_TASKS = ("transport.bus-routes", "health.asq3-screening", "nutrition.cacfp-meal-count")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def first_result(base_url: str, query: str) -> tuple[str | None, bool]:
    status, body = http_get(f"{base_url}/api/search?" + urllib.parse.urlencode({"q": query, "k": 1}))
    results = json.loads(body)["results"] if status == 200 else []
    return (results[0]["id"], results[0]["pinned"]) if results else (None, False)


def time_to_see(base_url: str, query: str, gold: str, committed: float, timeout_s: float) -> float | None:
    """Seconds from `committed` until `base_url` answers `query` with `gold` pinned first."""
    while time.monotonic() < committed + timeout_s:
        if first_result(base_url, query) == (gold, True):
            return time.monotonic() - committed
        time.sleep(0.01)
    return None


def rebuild_stats(base_url: str) -> tuple[float, float]:
    """(sum of seconds, count) of index rebuilds of the process that answers /metrics."""
    _status, body = http_get(f"{base_url}/metrics")
    total = count = 0.0
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "taskfinder_index_rebuild_duration_seconds_sum":
                total += sample.value
            elif sample.name == "taskfinder_index_rebuild_duration_seconds_count":
                count += sample.value
    return total, count


def summary(samples: list[float]) -> dict:
    return {"n": len(samples), "median_s": round(statistics.median(samples), 3),
            "p95_s": round(percentile(samples, 0.95), 3), "max_s": round(max(samples), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--database-url", help="default: a temporary SQLite file (its data is replaced!)")
    parser.add_argument("--cache-dir", type=Path, default=Settings.from_env().cache_dir)
    parser.add_argument("--timeout", type=float, default=10.0, help="give up on one edit after this long")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="taskfinder-live-"))
    url = args.database_url or f"sqlite:///{workdir / 'shared.db'}"
    prepare_demo_database(url)
    print(f"warming the embedding cache: {warm_embedding_cache(url, args.cache_dir):.1f} s", file=sys.stderr)
    ports = free_port(), free_port()
    common = {"DATABASE_URL": url, "TASKFINDER_DATA_DIR": workdir, "CACHE_DIR": args.cache_dir, "AUTO_FIT": "0"}
    servers = {
        "gunicorn (2 workers)": ServerProcess(gunicorn_command(), server_env(**common, HOST="127.0.0.1",
                                              PORT=ports[0], WEB_CONCURRENCY=2, WEB_THREADS=2),
                                              workdir / "gunicorn.log", ports[0]),
        "waitress": ServerProcess(waitress_command(ports[1]), server_env(**common), workdir / "waitress.log", ports[1]),
    }
    engine = db.make_engine(url)
    store = CatalogStore(engine)
    seen: dict[str, list[float]] = {name: [] for name in servers}
    missed = 0
    for server in servers.values():
        server.start()
    try:
        for server in servers.values():
            server.wait_ready()
        rebuilds_before = rebuild_stats(servers["waitress"].url)
        stamp = int(time.time())
        for edit in range(args.edits):
            query, gold = f"zorblax {stamp} edit {edit}", GOLD_TASKS[edit % len(GOLD_TASKS)]
            store.add_case(CaseRecord(query=query, gold=(gold,), rationale="benchmark edit"))
            committed = time.monotonic()
            with ThreadPoolExecutor(len(servers)) as pool:
                times = dict(zip(servers, pool.map(
                    lambda s: time_to_see(s.url, query, gold, committed, args.timeout), servers.values())))
            for name, value in times.items():
                if value is None:
                    missed += 1
                else:
                    seen[name].append(value)
            print(f"edit {edit}: " + ", ".join(f"{n} {v if v is None else round(v, 3)} s" for n, v in times.items()),
                  file=sys.stderr)
            time.sleep(0.5)  # let every gunicorn worker finish its rebuild before the next edit
        rebuilds_after = rebuild_stats(servers["waitress"].url)
    finally:
        for server in servers.values():
            server.stop()
        engine.dispose()
    rebuild_count = rebuilds_after[1] - rebuilds_before[1]
    report = {
        "edits": args.edits, "database": engine.dialect.name,
        "revision_poll_s": Settings.from_env().revision_poll_s,
        "propagation": {name: summary(values) for name, values in seen.items() if values},
        "missed": missed,
        "waitress_rebuild_mean_s": round((rebuilds_after[0] - rebuilds_before[0]) / rebuild_count, 3)
        if rebuild_count else None,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

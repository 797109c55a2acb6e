"""Per-request cost of the rate limiter on /api/search, through Flask's test client.

    python ops/bench_ratelimit.py [--requests 3000] [--redis-url redis://127.0.0.1:6379/0] [--json FILE]
    python ops/bench_ratelimit.py --modes off,refused,refused-redis     # what a refusal costs

Builds a small app (two tasks, embeddings off, no LLM) in a temporary directory for each mode:
limits off (RATE_LIMITS=0), on with in-process counters (no REDIS_URL), and on with Redis.
Every request is the same GET /api/search?q=lead, from 64 client addresses in turn under the
default limit (300/minute per client; each address makes about 50 requests, so each request
pays the full check and is answered 200). The first 200
requests warm up (index, caches, Redis scripts); the figure is the median wall-clock time of
the others, in µs, and the overhead is a mode's median minus the median with limits off.
The `refused` modes send every request from ONE client far over its limit (5/minute), so each
is answered 429: a flood must cost less to refuse than the same requests cost to answer (`off`
answers them, from the answer cache; issue 33 item 11).
CPU time per request (process time / requests) is printed beside it: on a shared machine
the wall clock also measures the other processes.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from catalog import db  # noqa: E402
from catalog.records import CaseRecord, TaskRecord  # noqa: E402
from settings import Settings  # noqa: E402

TASKS = [TaskRecord(id="lead", name="Lead Screening", help="Blood lead level results.", category="health"),
         TaskRecord(id="pool", name="Application Pool", help="Applicants and selection points.", category="ersea")]
CASES = [CaseRecord(query="eligibility", gold=("pool",), rationale="Eligibility is decided in the pool.")]
WARMUP = 200
CLIENTS = 64


def build(workdir: Path, env: dict[str, str]):
    from app import create_app

    settings = Settings.from_env({"TASKFINDER_DATA_DIR": str(workdir), "CACHE_DIR": str(workdir / "cache"),
                                  "AUTO_FIT": "0", "EMBEDDINGS_ENABLED": "0", "SECRET_KEY": "k" * 40, **env})
    app = create_app(settings)
    services = app.extensions["taskfinder"]
    db.upgrade(services.store.engine)
    services.store.import_tasks(TASKS)
    services.store.import_cases(CASES)
    return app


def measure(app, requests: int, status: int = 200, clients: int = CLIENTS) -> dict[str, float]:
    client = app.test_client()
    times = []
    cpu_start = 0.0
    for i in range(requests + WARMUP):
        if i == WARMUP:
            cpu_start = time.process_time()
        start = time.perf_counter()
        response = client.get("/api/search", query_string={"q": "lead"},
                              environ_base={"REMOTE_ADDR": f"198.51.100.{i % clients}"})
        elapsed = time.perf_counter() - start
        if i >= WARMUP:
            assert response.status_code == status, response.get_data(as_text=True)
            times.append(elapsed)
    cpu = time.process_time() - cpu_start
    return {"median_us": statistics.median(times) * 1e6, "cpu_us_per_request": cpu / requests * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--modes", default="off,memory,redis",
                        help="Comma-separated subset of off,memory,redis,refused,refused-redis.")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    limit = {"RATE_LIMITS": "1", "RATE_LIMIT_SEARCH": "300/minute"}
    modes = {
        "off": {"RATE_LIMITS": "0"},
        "memory": limit,
        "redis": {**limit, "REDIS_URL": args.redis_url, "REDIS_KEY_PREFIX": f"tfbench:{uuid.uuid4().hex[:8]}:"},
        "refused": {"RATE_LIMITS": "1", "RATE_LIMIT_SEARCH": "5/minute"},
        "refused-redis": {"RATE_LIMITS": "1", "RATE_LIMIT_SEARCH": "5/minute", "REDIS_URL": args.redis_url,
                          "REDIS_KEY_PREFIX": f"tfbench:{uuid.uuid4().hex[:8]}:"},
    }
    results = {}
    for name, env in [(m, modes[m]) for m in args.modes.split(",")]:
        with tempfile.TemporaryDirectory() as workdir:
            app = build(Path(workdir), env)
            refused = name.startswith("refused")
            results[name] = measure(app, args.requests, 429 if refused else 200, 1 if refused else CLIENTS)
            app.extensions["taskfinder_analytics"].close()
            app.extensions["taskfinder"].search.close()
    for name, figures in results.items():
        overhead = figures["median_us"] - results["off"]["median_us"] if "off" in results else float("nan")
        print(f"{name:7s} median {figures['median_us']:8.1f} µs  overhead {overhead:+7.1f} µs  "
              f"CPU {figures['cpu_us_per_request']:8.1f} µs/request")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

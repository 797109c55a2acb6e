"""Latency benchmark of the search pipeline on the demo catalog (no LLM).

    python ops/bench_prefilter.py [--repeats 20] [--json FILE]

Measures, per query of the demo test cases (and per keystroke of each, for type-ahead):
  prefilter       the pure ranking over all tasks, query embedding already computed
  search_warm     SearchService.search end to end, query embedding in the disk cache
  search_cold     SearchService.search end to end, query embedding computed (cache miss)
Reports medians and p95 in milliseconds, and the ratio cold/warm. Medians, not means: the
first call of anything pays for imports and page faults.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import diskcache  # noqa: E402

from catalog import db  # noqa: E402
from catalog.demo import DEMO_CASES, DEMO_CATALOG  # noqa: E402
from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from catalog.store import CatalogStore  # noqa: E402
from infra.metrics import Metrics  # noqa: E402
from search.embeddings import build_embedder  # noqa: E402
from search.prefilter import prefilter  # noqa: E402
from search.query import analyse_query  # noqa: E402
from serving.service import SearchService  # noqa: E402
from settings import Settings  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(samples: list[float]) -> dict:
    return {"n": len(samples), "median_ms": round(statistics.median(samples), 3),
            "p95_ms": round(percentile(samples, 0.95), 3), "max_ms": round(max(samples), 3)}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0



def read_all(result) -> None:
    """Read every ranked task's signals and contributions, as serving's response does."""
    for item in result.ranked:
        item.signals, item.contributions

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="taskfinder-bench-"))
    settings = Settings.from_env().with_overrides(data_dir=workdir, database_url=f"sqlite:///{workdir / 'bench.db'}",
                                                  cache_path=workdir / "cache", auto_fit=False)
    tasks = load_tasks_file(DEMO_CATALOG)
    cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
    store = CatalogStore(db.make_engine(settings.database))
    db.upgrade(store.engine)
    store.import_tasks(tasks)
    store.import_cases(cases)
    embedder = build_embedder(settings, diskcache.Cache(str(settings.cache_dir)))
    service = SearchService(settings, store, embedder, None, Metrics())
    build_ms = timed(lambda: service.live(wait=True))
    fit_ms = timed(lambda: service.refit(service.live(wait=True)))   # the per-catalog fit, as a server would
    live = service.live(wait=True)
    queries = [c.query for c in cases]
    # Every keystroke from the third on, of every 8th query (~600 prefixes: each costs a
    # cold embedding, ~40 ms on 2 cores).
    keystrokes = sorted({q[:n] for q in queries[::8] for n in range(3, len(q) + 1)})

    cold = [timed(lambda q=q: service.search(q, k=10)) for q in queries]
    warm = [timed(lambda q=q: service.search(q, k=10)) for q in queries for _ in range(args.repeats)]
    vectors = {q: embedder.embed([analyse_query(live.index, q).embedding_text], "query")[0] for q in queries}
    # each ranked task's signals and contributions read, as a response reads them (ScoredTask
    # builds the two dicts on first read: a ranking nobody reads them from costs less)
    pure = [timed(lambda q=q: read_all(prefilter(live.index, q, live.params.weights, live.params.shortlist_size,
                                                 query_vector=vectors[q])))
            for q in queries for _ in range(args.repeats)]
    typeahead_cold = [timed(lambda q=q: service.search(q, k=8)) for q in keystrokes]
    report = {
        "data": {"catalog": str(DEMO_CATALOG), "tasks": len(tasks), "test_cases": len(cases),
                 "queries": len(queries), "keystroke_prefixes": len(keystrokes),
                 "embedding_model": embedder.model if embedder else None, "repeats": args.repeats},
        "index_build_ms_cold_embeddings": round(build_ms, 1),
        "fit_ms": round(fit_ms, 1),
        "ranker": live.params.summary(),
        "prefilter": summary(pure),
        "search_warm": summary(warm),
        "search_cold": summary(cold),
        "typeahead_keystroke_cold": summary(typeahead_cold),
        "ratio_cold_over_warm_median": round(statistics.median(cold) / statistics.median(warm), 2),
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

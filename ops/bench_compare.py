"""Is this checkout's prefilter slower than another's? A paired benchmark for noisy hosts.

    python ops/bench_compare.py OTHER_CHECKOUT [--repeats 40] [--trials 4]

On a shared 2-core VM one process's timings drift by 10-50% from run to run (a neighbour's load,
frequency changes), far more than a refactor's cost, so two runs one after the other compare the
host, not the code. Here both checkouts run at the same time, each pinned to its own core
(`taskset`), on the demo catalog fitted and indexed as a server would (the same call as
ops/bench_prefilter.py's `prefilter` row: the pure ranking of every demo test case, the query
embedding already computed); each query's cost is its best of `--repeats` runs (interference
only ever adds time), averaged over the queries. The cores are swapped every trial, so a slower
core counts against both. Prints each trial's two means and their ratio (this / other) and the
median ratio; the other checkout needs this repository's layout (catalog/, search/, settings.py)
and a service module at serving/service.py or search/service.py.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One checkout's measurement, run in a child process whose sys.path starts at that checkout. Its
# setup repeats ops/bench_prefilter.py's on purpose: the child must build with the OTHER
# checkout's code, and older checkouts keep that setup inline in their bench's main().
CHILD = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
root, repeats, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, root)
import diskcache
from catalog import db
from catalog.demo import DEMO_CASES, DEMO_CATALOG
from catalog.formats import load_cases_file, load_tasks_file
from catalog.store import CatalogStore
from search.embeddings import build_embedder
from search.prefilter import analyse_query, prefilter
from settings import Settings
from infra.metrics import Metrics
try:
    from serving.service import SearchService
except ImportError:   # before the services layer moved (issue 35)
    from search.service import SearchService
work = Path(tempfile.mkdtemp(prefix="taskfinder-compare-"))
settings = Settings.from_env().with_overrides(data_dir=work, database_url=f"sqlite:///{work / 'b.db'}",
                                              cache_path=Path(cache), auto_fit=False)
tasks = load_tasks_file(DEMO_CATALOG)
cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
store = CatalogStore(db.make_engine(settings.database))
db.upgrade(store.engine)
store.import_tasks(tasks)
store.import_cases(cases)
embedder = build_embedder(settings, diskcache.Cache(cache))
service = SearchService(settings, store, embedder, None, Metrics())
service.refit(service.live(wait=True))
live = service.live(wait=True)
queries = [c.query for c in cases]
vectors = {q: embedder.embed([analyse_query(live.index, q).embedding_text], "query")[0] for q in queries}
best = {q: float("inf") for q in queries}
for _ in range(repeats):
    for q in queries:
        started = time.perf_counter()
        result = prefilter(live.index, q, live.params.weights, live.params.shortlist_size, query_vector=vectors[q])
        for item in result.ranked:   # read as a response reads them (built on first read since 2026-11-27)
            item.signals, item.contributions
        best[q] = min(best[q], time.perf_counter() - started)
print(json.dumps({"mean_ms": statistics.mean(best.values()) * 1000, "queries": len(queries)}))
"""


def measure_pair(this: Path, other: Path, cores: tuple[int, int], repeats: int, cache: str) -> tuple[float, float]:
    """(this checkout's mean best-of-N ms, the other's), run at once on `cores` (this, other)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    runs = [subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", CHILD, str(tree), str(repeats), cache],
                             stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
            for tree, core in ((this, cores[0]), (other, cores[1]))]
    out = []
    for run in runs:
        stdout, _ = run.communicate()
        if run.returncode:
            raise SystemExit(f"a measurement failed (exit {run.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1])["mean_ms"])
    return out[0], out[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the checkout to compare with (e.g. a `git worktree` of main)")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--cache", default=str(ROOT / "instance" / "cache"),
                        help="embedding cache both share (the same model: the same vectors)")
    args = parser.parse_args()
    ratios = []
    for trial in range(args.trials):
        cores = (0, 1) if trial % 2 == 0 else (1, 0)
        mine, theirs = measure_pair(ROOT, args.other.resolve(), cores, args.repeats, args.cache)
        ratios.append(mine / theirs)
        print(f"trial {trial + 1} (this on core {cores[0]}): this {mine:.3f} ms, other {theirs:.3f} ms, "
              f"ratio {mine / theirs:.3f}")
    print(f"median ratio this/other: {statistics.median(ratios):.3f} over {args.trials} trials")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""search.exemplars.typical_neighbour on the demo's exemplar memory, against numpy's row sample
and median (`by_numpy`: how it was written before, and the reference tests/test_abstention.py
holds it to, bit for bit).

    python ops/bench_typical.py [--runs 7]

The demo's serving index (its shipped fit, its shipped vectors seeded into a fresh cache, so no
text is embedded), then each version called 20 times per run; the medians of --runs runs in ms,
and whether the two give the same bits. typical_neighbour runs at every index build with
embeddings: a preview builds ten fold indexes (design/performance.md).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.exemplars import TYPICAL_SAMPLE, typical_neighbour  # noqa: E402

CALLS = 20


def by_numpy(vectors: np.ndarray, starts: np.ndarray, group_rows: np.ndarray, n_tasks: int,
             other_language: np.ndarray | None = None) -> np.ndarray:
    """typical_neighbour as written before its row sample and median were specialised:
    np.linspace and np.unique pick the rows, np.median takes the median."""
    out = np.full(n_tasks, np.nan, dtype=np.float32)
    ends = np.append(starts[1:], len(vectors)).astype(np.int64)
    for start, end, row in zip(starts, ends, group_rows):
        group = vectors[start:end]
        if other_language is not None:
            group = group[~other_language[start:end]]
        if len(group) < 2:
            continue
        picked = np.unique(np.linspace(0, len(group) - 1, min(TYPICAL_SAMPLE, len(group))).astype(np.int64))
        similarity = group[picked] @ group.T
        similarity[np.arange(picked.size), picked] = -np.inf
        out[row] = float(np.median(similarity.max(axis=1)))
    known = out[~np.isnan(out)]
    return np.where(np.isnan(out), float(np.median(known)) if known.size else 1.0, out).astype(np.float32)


def demo_memory():
    """The exemplar memory of the demo's serving index, its vectors from the shipped ones."""
    from catalog.demo import DEMO_FIT, DEMO_VECTORS
    from infra.cache import HealingCache
    from search.assembly import attach_vectors, serving_index
    from search.embeddings import build_embedder
    from search.ranker import RankerParams
    from search.shipped import ShippedFit, demo_store
    from settings import Settings

    directory = Path(tempfile.mkdtemp(prefix="bench-typical-"))
    settings = Settings.from_env({"TASKFINDER_DATA_DIR": str(directory), "CACHE_DIR": str(directory / "cache")})
    embedder = build_embedder(settings, HealingCache(settings.cache_dir))
    shipped = ShippedFit.load(DEMO_FIT, DEMO_VECTORS)
    for kind, (texts, vectors) in shipped.vectors.items():
        embedder.seed(texts, kind, vectors)
    store = demo_store(directory)
    index = serving_index(settings, store.tasks(), store.cases(), RankerParams.from_dict(shipped.params))
    return attach_vectors(index, embedder).exemplars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python ops/bench_typical.py")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    memory = demo_memory()
    inputs = (memory.vectors, memory.group_starts, memory.group_rows, memory.n_tasks, memory.other_language)
    same = typical_neighbour(*inputs).tobytes() == by_numpy(*inputs).tobytes()
    print(f"the demo's memory: {len(memory.vectors)} exemplars, {memory.n_tasks} tasks; the same bits: {same}")
    for name, function in (("numpy's sample and median", by_numpy), ("search.exemplars", typical_neighbour)):
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            for _ in range(CALLS):
                function(*inputs)
            times.append((time.perf_counter() - started) / CALLS * 1000)
        print(f"{name}: median {statistics.median(times):.1f} ms a call")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

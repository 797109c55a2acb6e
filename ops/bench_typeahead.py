"""What a keystroke costs the prefilter: the demo's case queries cut after 3, 5 and 8 characters
(read as still being typed: the typing signals of search/typed.py are computed) against the whole
queries, full mode, after a warm-up pass (type-ahead repeats its words, and the memos keep them).

    python ops/bench_typeahead.py [--rounds 5]

Prints the median over rounds of each pass's median milliseconds per query. The task and query
vectors are fixed random unit vectors: the cost of the dense signals is the same whatever their
values, and no embedder runs (its cost is search.embeddings', measured in docs/results.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.formats import load_tasks_file, load_cases_file  # noqa: E402
from lexicon.rationale import build_lexicon  # noqa: E402
from search.assembly import attach_vectors  # noqa: E402
from search.index import build_index  # noqa: E402
from search.prefilter import prefilter  # noqa: E402
from search.query import analyse_query  # noqa: E402
from settings import Settings  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "catalog" / "data"


class RandomVectors:
    """Fixed random unit vectors in e5-small's 384 dimensions (stands in for the embedder)."""

    def embed(self, texts, kind):
        rng = np.random.default_rng(len(texts))
        vectors = rng.normal(size=(len(texts), 384)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def median_ms(index, weights, texts, vector) -> float:
    times = []
    for text in texts:
        started = time.perf_counter()
        prefilter(index, analyse_query(index, text), weights, 15, query_vector=vector)
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    settings = Settings.from_env({})
    tasks = load_tasks_file(DATA / "headstart_catalog.jsonl")
    cases = load_cases_file(DATA / "headstart_cases.jsonl", {t.id for t in tasks})
    index = attach_vectors(build_index(tasks, build_lexicon(cases), settings.field_weights, cases=cases),
                           RandomVectors())
    whole = [c.query for c in cases if c.gold]
    cuts = [q[:n] for q in whole for n in (3, 5, 8) if len(q) > n]
    vector = RandomVectors().embed(["query"], "query")[0]
    for texts in (cuts, whole):   # warm-up
        median_ms(index, settings.weights, texts, vector)
    for name, texts in (("cut after 3/5/8 characters", cuts), ("whole query", whole)):
        rounds = [median_ms(index, settings.weights, texts, vector) for _ in range(args.rounds)]
        print(f"{name}: prefilter p50 {statistics.median(rounds):.3f} ms ({len(texts)} queries, {len(tasks)} tasks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

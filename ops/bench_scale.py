"""Scale benchmark of the pure prefilter ranking on synthetic catalogs (no embedding model, no DB).

    python ops/bench_scale.py [--scale small|large|both] [--queries 300] [--seed 7]
                              [--repeats 3] [--profile] [--profile-build] [--json FILE]
                              [--learned-searches 100000] [--learned-weight 1.0] [--learned-queries 3000]
                              [--learned-sessions 20000]

Scales (from the scaling issue):
  small   150 tasks,    15,000 test cases   target: prefilter p50 <= 2 ms
  large   10,000 tasks, 100,000 test cases  target: prefilter p50 <= 15 ms

Data. A synthetic vocabulary of pronounceable words (default 20,000) with Zipf frequencies.
Tasks are grouped in categories; each task's topic mixes words shared within its category
with words of its own; names are 2-5 words, help texts 10-30 words, some tasks have an alias. Test cases are
3-10-word queries (topic words of the gold task, common words, a few stopwords, sometimes a
typo), one gold task each, distributed over the tasks by a Zipf law (a few tasks get many
cases, most get a handful); ~3% are out of scope (empty gold) and ~30% carry a rationale.
The index is built with the product's own

    build_index(tasks, build_lexicon(cases), FieldWeights(), cases=cases)

and its dense parts are attached without the embedding model: L2-normalised random 384-dim
float32 vectors with structure (a shared anisotropy direction + a category center + a task
center + noise), so that a task's exemplars are close to each other and to its task vector
(cos ~0.85), tasks of a category are closer than unrelated ones, and the centroid ->
nearest-neighbour cascade works on realistic orderings. Prototypes are 20 x centroids
(+ noise), so the prototype signal is computed too (weights: defaults with prototype = 1.0).

Learned evidence (--learned-searches N, issue 16; ops/bench_traffic.py says how the traffic is
made): N searches with the widget's impressions and position-biased clicks are written into a
real migrated SQLite database by the product's analytics writer, folded into learned_evidence by
the product's aggregation (analytics.learning.aggregate, timed: it runs off the request path, in
the fit), and the pairs that count (search.learned.eligible) are attached to the index as its
learned memory, with vectors: the traffic query's own synthetic vector. The prefilter is then
timed with the `learned` signal fused (weight 1.0; --learned-weight 0 times the prefilter as it
runs when the fit gives the signal weight 0: computed at the returned tasks only). With
`--learned-as cases` (the default: what the fit chose in every simulator run) the pairs instead
join the cases, as the served index then holds them, with the written-cases-only index beside it
for contributions.learned.

Held-out queries (--queries) are generated like the cases but not taken from them: ~20% have
a typo in a topic word, ~5% are out of scope, ~5% repeat a case query exactly (pins).

Measured per query (after one warm-up pass; --repeats passes, all samples pooled):
  prefilter          prefilter(index, text, weights, k=15, restrict_roles=False, query_vector=v)
  prefilter_analysed the same with the query already analysed (AnalysedQuery)
and, in a separate pass, the stages as the prefilter runs them, each timed on its own:
  analyse_query, plan_query, sparse_signals (incl. [rows]), dense_signals,
  signal_values (whole, cross-check), pinned_for + nearest_out_of_scope,
  rank_values (fuse, softmax, top-k), explain (the per-result word explanations).
Also: data generation, build_lexicon, build_index, with_vectors and with_prototypes times,
RSS before/after the build and the index's array bytes. --profile adds cProfile top
functions of the query loop; --profile-build (or a build over 120 s) of build_index.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pstats
import resource
import statistics
import string
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path


def _blas_threads_from_argv(argv: list[str]) -> str | None:
    """--blas-threads must act before numpy loads OpenBLAS, so it is read here."""
    for i, arg in enumerate(argv):
        if arg == "--blas-threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--blas-threads="):
            return arg.split("=", 1)[1]
    return None


if _blas_threads_from_argv(sys.argv) not in (None, "env"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _blas_threads_from_argv(sys.argv)

import numpy as np  # noqa: E402
from scipy import sparse  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from catalog.records import CaseRecord, TaskRecord  # noqa: E402
from lexicon.rationale import build_lexicon  # noqa: E402
from lexicon.language import STOPWORDS  # noqa: E402
from search import prefilter as prefilter_module  # noqa: E402
from search.exemplars import NEIGHBOUR_FULL_SCAN, neighbour_candidates, neighbour_signal  # noqa: E402
from search.index import build_index  # noqa: E402
from search.prefilter import dense_signals, prefilter, rank_values, signal_values, sparse_signals  # noqa: E402
from search.query import analyse_query, plan_query  # noqa: E402
from search.ranker import FusionWeights, default_params  # noqa: E402
from settings import FieldWeights, Settings  # noqa: E402

DIM = 384
K = 15
SCALES = {
    "small": {"tasks": 150, "cases": 15_000, "target_p50_ms": 2.0},
    "large": {"tasks": 10_000, "cases": 100_000, "target_p50_ms": 15.0},
}
QUERY_STOPWORDS = ("how", "do", "i", "the", "a", "to", "for", "my", "where", "can", "is", "of", "in", "what")
PROFILE_BUILD_AFTER_S = 120.0


# ----------------------------------------------------------------------------- measurement

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(samples: list[float]) -> dict:
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 3),
            "p95_ms": round(percentile(samples, 0.95), 3), "max_ms": round(max(samples), 3),
            "mean_ms": round(statistics.fmean(samples), 3)}


def rss_mb() -> float:
    """Current resident set size (Linux /proc; falls back to the peak)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return peak_rss_mb()


def cpu_description() -> dict:
    """The CPU the figures come from (Linux /proc and /sys; empty elsewhere): the model name and
    the last-level cache, which decides whether the cascade's exemplar matrix stays cached
    between queries (docs/results.md#latency)."""
    out: dict = {}
    try:
        with open("/proc/cpuinfo") as handle:
            out["model"] = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    caches = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/level"))
    if caches:
        last = max(caches, key=lambda level: int(level.read_text()))
        out["last_level_cache"] = (last.parent / "size").read_text().strip()
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def array_bytes(obj, seen: set | None = None, depth: int = 0) -> int:
    """Bytes held by the numpy arrays and scipy sparse matrices reachable from a dataclass
    (the dense and sparse parts of the index; Python dicts and tuples are not counted)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 3:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if sparse.issparse(obj):
        return obj.data.nbytes + obj.indices.nbytes + obj.indptr.nbytes
    if hasattr(obj, "__dataclass_fields__"):
        return sum(array_bytes(getattr(obj, name), seen, depth + 1) for name in obj.__dataclass_fields__)
    return 0


CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}
_clock = CLOCK["wall"]


def timed(fn):
    """(milliseconds, fn()) on the chosen clock (--clock): wall time, or the CPU time of this
    thread (with --blas-threads 1 all the ranking work runs in it), which other processes
    competing for the cores do not inflate."""
    start = _clock()
    out = fn()
    return (_clock() - start) * 1000.0, out


def profile_top(fn, top: int = 18) -> tuple[list[dict], str]:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    rows = []
    for (filename, line, name), (cc, nc, tottime, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{Path(filename).name}:{line}({name})", "calls": nc,
                     "tottime_s": round(tottime, 4), "cumtime_s": round(cumtime, 4)})
    rows.sort(key=lambda r: -r["tottime_s"])
    return rows[:top], stream.getvalue()


# ----------------------------------------------------------------------------- synthetic data

class ZipfSampler:
    """Ranks 0..n-1 with P(r) ~ 1 / (r + offset)^s, drawn in bulk."""

    def __init__(self, n: int, s: float, rng: np.random.Generator, offset: float = 1.0) -> None:
        p = 1.0 / np.power(np.arange(n) + offset, s)
        self.cdf = np.cumsum(p / p.sum())
        self.rng = rng

    def draw(self, size: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(size)), len(self.cdf) - 1)


def make_vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """Pronounceable, unique, lowercase words of 2-4 syllables (no stopwords)."""
    onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "br", "cl", "cr", "dr", "fl", "gr", "pl", "pr", "sh", "sk", "sl", "sp", "st", "str", "th", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
    codas = ["", "", "", "n", "r", "s", "l", "t", "m", "nd", "st", "ng", "x"]
    out: dict[str, None] = {}
    while len(out) < size:
        syllables = int(rng.integers(2, 5))
        word = "".join(onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))]
                       for _ in range(syllables)) + codas[rng.integers(len(codas))]
        if 4 <= len(word) <= 14 and word not in STOPWORDS:
            out[word] = None
    return list(out)


def typo(word: str, rng: np.random.Generator) -> str:
    """One edit a user makes: drop, double, transpose or substitute a letter (not the first)."""
    if len(word) < 5:
        return word + word[-1]
    i = int(rng.integers(1, len(word) - 1))
    op = int(rng.integers(4))
    if op == 0:
        return word[:i] + word[i + 1:]
    if op == 1:
        return word[:i] + word[i] + word[i:]
    if op == 2:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    return word[:i] + string.ascii_lowercase[int(rng.integers(26))] + word[i + 1:]


@dataclass
class Synthetic:
    tasks: list[TaskRecord]
    cases: list[CaseRecord]
    task_topics: list[np.ndarray]       # per task: word indices of its topic
    task_category: np.ndarray           # per task: category index
    queries: list[str]                  # held-out queries
    query_gold: list[int]               # task row of each held-out query, -1 out of scope
    case_gold_rows: np.ndarray          # task row of each case, -1 out of scope


class Generator:
    def __init__(self, n_tasks: int, n_cases: int, vocab_size: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.n_tasks, self.n_cases = n_tasks, n_cases
        self.vocab = make_vocabulary(vocab_size, self.rng)
        self.common = ZipfSampler(vocab_size, 1.0, self.rng, offset=2.7)   # general language
        self.n_categories = max(8, n_tasks // 15)

    def words_of(self, indices) -> list[str]:
        return [self.vocab[int(i)] for i in indices]

    def build(self, n_queries: int) -> Synthetic:
        rng, V = self.rng, len(self.vocab)
        # Topic words come from the less frequent 80% of the vocabulary (content words).
        topic_pool = np.arange(V // 5, V)
        # A category has 30 words its tasks share (so tasks of a category compete for a query's
        # words); the first 5 are its own name/generic words. A task's topic is 3-5 of them plus
        # 3-6 words of its own.
        category_words = [rng.choice(topic_pool, 30, replace=False) for _ in range(self.n_categories)]
        self.category_words = category_words   # for more queries later (the learned-evidence traffic)
        category_names = [" ".join(self.words_of(w[: int(rng.integers(1, 3))])) for w in category_words]
        task_category = rng.integers(self.n_categories, size=self.n_tasks)
        topics = [np.concatenate([rng.choice(category_words[c][5:], int(rng.integers(3, 6)), replace=False),
                                  rng.choice(topic_pool, int(rng.integers(3, 7)), replace=False)])
                  for c in task_category]
        for topic in topics:
            rng.shuffle(topic)
        tasks = []
        for row in range(self.n_tasks):
            topic, cat = topics[row], task_category[row]
            n_name = int(rng.integers(2, 6))
            name_words = list(topic[: max(1, n_name - 1)]) + ([category_words[cat][0]] if n_name > 1 else [])
            n_help = int(rng.integers(10, 31))
            n_specific = max(2, int(0.4 * n_help))
            specific = rng.choice(np.concatenate([topic, category_words[cat][:5]]), n_specific)
            help_words = np.concatenate([specific, self.common.draw(n_help - n_specific)])
            rng.shuffle(help_words)
            aliases = ()
            if rng.random() < 0.3:
                aliases = (" ".join(self.words_of(rng.choice(topic, int(rng.integers(1, 4)), replace=False))).title(),)
            tasks.append(TaskRecord(id=f"t{row:05d}", name=" ".join(self.words_of(name_words)).title(),
                                    help=" ".join(self.words_of(help_words)).capitalize() + ".",
                                    category=category_names[cat].replace(" ", "_"), aliases=aliases))
        # Cases per task: Zipf (s = 0.7) over a random permutation of the tasks.
        popularity = rng.permutation(self.n_tasks)
        task_sampler = ZipfSampler(self.n_tasks, 0.7, rng)
        n_oos = int(round(0.03 * self.n_cases))
        gold_rows = np.concatenate([popularity[task_sampler.draw(self.n_cases - n_oos)], np.full(n_oos, -1)])
        rng.shuffle(gold_rows)
        cases = []
        for gold in gold_rows:
            query = self.query(int(gold), topics, task_category, category_words, typo_rate=0.05)
            rationale = ""
            if gold >= 0 and rng.random() < 0.3:
                n = int(rng.integers(4, 11))
                rationale = " ".join(self.words_of(np.concatenate([
                    rng.choice(topics[gold], max(1, n // 2)), self.common.draw(n - max(1, n // 2))])))
            cases.append(CaseRecord(query=query, gold=(tasks[gold].id,) if gold >= 0 else (), rationale=rationale))
        # Held-out queries: 5% out of scope, 5% exact repeats of a case query, the rest new
        # (20% of them with a typo in a topic word).
        queries, query_gold = [], []
        for i in range(n_queries):
            u = rng.random()
            if u < 0.05:
                queries.append(self.query(-1, topics, task_category, category_words, 0.0))
                query_gold.append(-1)
            elif u < 0.10:
                j = int(rng.integers(len(cases)))
                queries.append(cases[j].query)
                query_gold.append(int(gold_rows[j]))
            else:
                gold = int(popularity[task_sampler.draw(1)[0]])
                queries.append(self.query(gold, topics, task_category, category_words, typo_rate=0.2))
                query_gold.append(gold)
        return Synthetic(tasks, cases, topics, task_category, queries, query_gold, gold_rows)

    def query(self, gold: int, topics, task_category, category_words, typo_rate: float) -> str:
        rng = self.rng
        n = int(rng.integers(3, 11))
        n_stop = min(int(rng.integers(0, 4)), n - 2)
        n_content = n - n_stop
        if gold < 0:   # out of scope: general words and rare words no task is about
            content = self.words_of(np.concatenate([self.common.draw(n_content - 1),
                                                    rng.integers(len(self.vocab) // 2, len(self.vocab), 1)]))
        else:
            n_topic = min(n_content, int(rng.integers(1, 5)))
            pool = np.concatenate([topics[gold], category_words[task_category[gold]][:2]])
            content = self.words_of(np.concatenate([rng.choice(pool, n_topic, replace=False),
                                                    self.common.draw(n_content - n_topic)]))
            if rng.random() < typo_rate:
                content[0] = typo(content[0], rng)   # the first word is a topic word
        stop = list(rng.choice(QUERY_STOPWORDS, n_stop)) if n_stop else []
        mixed = stop[: n_stop // 2 + 1] + content + stop[n_stop // 2 + 1:]
        return " ".join(mixed)


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class VectorSpace:
    """Structured random embeddings: v = unit(A*g + B*category + C*task + D*noise), with g a
    shared direction (the anisotropy of real sentence embeddings) and all parts unit random.
    Same task ~0.86 cosine, same category ~0.61, unrelated ~0.44."""

    A, B, C, D = 0.8, 0.5, 0.6, 0.45

    def __init__(self, n_tasks: int, task_category: np.ndarray, seed: int) -> None:
        self.rng = np.random.default_rng(seed + 1)
        self.g = unit(self.rng.standard_normal(DIM, dtype=np.float32))
        self.categories = unit(self.rng.standard_normal((int(task_category.max()) + 1, DIM), dtype=np.float32))
        self.centers = unit(self.rng.standard_normal((n_tasks, DIM), dtype=np.float32))
        self.task_category = task_category

    def around(self, task_rows: np.ndarray, noise: float | None = None) -> np.ndarray:
        """One vector per entry of task_rows (-1: out of scope, no task part), in chunks."""
        noise = self.D if noise is None else noise
        out = np.empty((len(task_rows), DIM), dtype=np.float32)
        for start in range(0, len(task_rows), 20_000):
            rows = task_rows[start:start + 20_000]
            eps = unit(self.rng.standard_normal((len(rows), DIM), dtype=np.float32))
            inscope = (rows >= 0)[:, None]
            safe = np.where(rows >= 0, rows, 0)
            v = self.A * self.g + noise * eps
            v = v + inscope * (self.B * self.categories[self.task_category[safe]] + self.C * self.centers[safe])
            v = v + (~inscope) * (0.9 * unit(self.rng.standard_normal((len(rows), DIM), dtype=np.float32)))
            out[start:start + len(rows)] = unit(v)
        return out


# ----------------------------------------------------------------------------- one scale

def run_scale(name: str, n_tasks: int, n_cases: int, target: float, args) -> dict:
    gc.collect()
    rss_start = rss_mb()
    generator = Generator(n_tasks, n_cases, args.vocab, args.seed)
    gen_ms, data = timed(lambda: generator.build(args.queries))
    print(f"[{name}] generated {len(data.tasks)} tasks, {len(data.cases)} cases, {len(data.queries)} queries "
          f"in {gen_ms / 1000:.1f} s", file=sys.stderr)

    gc.collect()
    rss_before = rss_mb()
    lexicon_ms, lexicon = timed(lambda: build_lexicon(data.cases))
    build_profile = None
    if args.profile_build:
        rows, text = profile_top(lambda: build_index(data.tasks, lexicon, FieldWeights(), cases=data.cases), 20)
        build_profile = rows
        print(f"[{name}] cProfile of build_index:\n{text}", file=sys.stderr)
    build_ms, index = timed(lambda: build_index(data.tasks, lexicon, FieldWeights(), cases=data.cases))
    print(f"[{name}] build_lexicon {lexicon_ms / 1000:.1f} s, build_index {build_ms / 1000:.1f} s", file=sys.stderr)
    if build_ms / 1000 > PROFILE_BUILD_AFTER_S and not args.profile_build:
        rows, text = profile_top(lambda: build_index(data.tasks, lexicon, FieldWeights(), cases=data.cases), 20)
        build_profile = rows
        print(f"[{name}] build_index took > {PROFILE_BUILD_AFTER_S:.0f} s; cProfile:\n{text}", file=sys.stderr)
    gc.collect()
    rss_after_sparse = rss_mb()

    # Dense parts, without the embedding model (see the module docstring).
    space = VectorSpace(n_tasks, data.task_category, args.seed)
    vec_gen_ms, generated = timed(lambda: (
        space.around(np.arange(n_tasks), noise=0.55),                        # task passages
        space.around(np.asarray(index.exemplars.task_rows, dtype=np.int64)),  # exemplars, in texts order
        space.around(np.full(len(index.exemplars.oos_texts), -1)),           # out-of-scope cases
    ))
    task_vectors, exemplar_vectors, oos_vectors = generated
    with_vectors_ms, index = timed(lambda: index.with_vectors(task_vectors, exemplar_vectors, oos_vectors))
    noise = 0.5 * unit(space.rng.standard_normal((n_tasks, DIM), dtype=np.float32))
    prototypes = (20.0 * (index.exemplars.centroids + noise)).astype(np.float32)
    with_prototypes_ms, index = timed(lambda: index.with_prototypes(prototypes))
    del generated, task_vectors, exemplar_vectors, oos_vectors, prototypes, noise
    query_vectors = space.around(np.asarray(data.query_gold, dtype=np.int64), noise=1.4)
    gc.collect()
    rss_after = rss_mb()

    params = default_params(Settings())
    weights = FusionWeights(replace(params.weights.full, prototype=1.0), params.weights.sparse)
    typo_min = Settings().typo_min_similarity
    queries = data.queries
    assert index.has_vectors and index.prototypes is not None
    learned_report = None
    if args.learned_searches:
        index, weights, learned_report = attach_learned_traffic(name, generator, data, index, space, weights, args)

    def run_prefilter(i: int, q):
        query = analyse_query(index, q, typo_min) if isinstance(q, str) else q   # as prefilter() would, at this tolerance
        return prefilter(index, query, weights, k=K, restrict_roles=False, query_vector=query_vectors[i])

    # Warm-up (page faults, stem cache of the query words as in a running process).
    results = [run_prefilter(i, q) for i, q in enumerate(queries)]
    analysed = [analyse_query(index, q, typo_min) for q in queries]
    e2e, pre_analysed = [], []
    for _ in range(args.repeats):
        for i, q in enumerate(queries):
            e2e.append(timed(lambda: run_prefilter(i, q))[0])
        for i, a in enumerate(analysed):
            pre_analysed.append(timed(lambda: run_prefilter(i, a))[0])

    # Stages, each timed on its own, in the order prefilter runs them.
    explain = getattr(prefilter_module, "explain_rows", None)
    stages: dict[str, list[float]] = {s: [] for s in (
        "analyse_query", "visible", "plan_query", "sparse_signals", "dense_signals", "signal_values",
        "pins_and_oos", "rank_values", "explain")}
    for _ in range(args.repeats):
        for i, q in enumerate(queries):
            v = query_vectors[i]
            t, a = timed(lambda: analyse_query(index, q, typo_min))
            stages["analyse_query"].append(t)
            t, (rows, visible) = timed(lambda: index.visible(None, False))
            stages["visible"].append(t)
            t, plan = timed(lambda: plan_query(index, a.words, a.corrections))
            stages["plan_query"].append(t)
            t, values = timed(lambda: {n: s[rows] for n, s in sparse_signals(index, plan).items()})
            stages["sparse_signals"].append(t)
            t, dense = timed(lambda: dense_signals(index, rows, v))
            stages["dense_signals"].append(t)
            values.update(dense)
            stages["signal_values"].append(timed(lambda: signal_values(index, a, rows, v))[0])
            t, (pinned, oos) = timed(lambda: (index.lexicon.pinned_for(a.text),
                                              index.exemplars.nearest_out_of_scope(v)))
            stages["pins_and_oos"].append(t)
            t, result = timed(lambda: rank_values(visible, values, weights, K, pinned, oos, a.corrections))
            stages["rank_values"].append(t)
            if explain is not None:
                stages["explain"].append(timed(lambda: explain(index, rows[:len(result.ranked)].tolist(), a.words,
                                                               a.corrections))[0])
    stages = {s: samples for s, samples in stages.items() if samples}
    stage_p50 = {s: round(statistics.median(samples), 3) for s, samples in stages.items()}
    sparse_total = [p + s for p, s in zip(stages["plan_query"], stages["sparse_signals"])]

    # Dense detail: the pieces of dense_signals, replicated (line timing).
    memory = index.exemplars
    rows_all, _ = index.visible(None, False)
    detail: dict[str, list[float]] = {s: [] for s in (
        "centroids[rows] @ v", "task_vectors[rows] @ v", "prototypes[rows] @ v",
        "neighbour (as dense_signals)", "(centroids @ v)[rows] (no copy)", "vectors @ v (full exemplar scan)")}
    full_scan = len(memory.texts) <= NEIGHBOUR_FULL_SCAN
    for i in range(len(queries)):
        v = query_vectors[i]
        t, centroid = timed(lambda: memory.centroids[rows_all] @ v)
        detail["centroids[rows] @ v"].append(t)
        detail["task_vectors[rows] @ v"].append(timed(lambda: index.task_vectors[rows_all] @ v)[0])
        detail["prototypes[rows] @ v"].append(timed(lambda: index.prototypes[rows_all] @ v)[0])
        detail["neighbour (as dense_signals)"].append(
            timed(lambda: neighbour_signal(memory, rows_all, centroid, v))[0])
        detail["(centroids @ v)[rows] (no copy)"].append(timed(lambda: (memory.centroids @ v)[rows_all])[0])
        detail["vectors @ v (full exemplar scan)"].append(timed(lambda: memory.vectors @ v)[0])
    detail_p50 = {s: round(statistics.median(samples), 3) for s, samples in detail.items()}

    query_profile = None
    if args.profile:
        def loop():
            for _ in range(args.repeats):
                for i, q in enumerate(queries):
                    run_prefilter(i, q)
        rows, text = profile_top(loop, 22)
        query_profile = rows
        print(f"[{name}] cProfile of {args.repeats} x {len(queries)} prefilter calls:\n{text}", file=sys.stderr)

    # Sanity: does the synthetic data behave like a catalog (the gold task near the top)?
    in_scope = [(r, g) for r, g in zip(results, data.query_gold) if g >= 0]
    hit1 = sum(1 for r, g in in_scope if r.ranked and r.ranked[0].task.id == data.tasks[g].id) / max(1, len(in_scope))
    hit15 = sum(1 for r, g in in_scope if any(s.task.id == data.tasks[g].id for s in r.ranked)) / max(1, len(in_scope))
    n_corrected = sum(1 for a in analysed if a.corrections)
    counts = np.bincount(data.case_gold_rows[data.case_gold_rows >= 0], minlength=n_tasks)
    p50_e2e = statistics.median(e2e)
    report = {
        "scale": name,
        "data": {"tasks": n_tasks, "cases": len(data.cases), "out_of_scope_cases": int((data.case_gold_rows < 0).sum()),
                 "queries": len(queries), "repeats": args.repeats, "vocabulary": args.vocab,
                 "queries_with_corrections": n_corrected,
                 "cases_per_task": {"min": int(counts.min()), "median": float(np.median(counts)), "max": int(counts.max())},
                 "exemplars": len(memory.texts), "terms": len(index.vocabulary), "surface_words": len(index.surface_words),
                 "lexical_nnz": int(index.lexical.nnz), "rationale_nnz": int(index.rationale.nnz),
                 "exemplar_lexical_nnz": int(memory.lexical.nnz),
                 "neighbour_mode": "full scan" if full_scan else
                     f"cascade ({neighbour_candidates(rows_all.size)} candidate tasks)",
                 "sanity_hit_at_1": round(hit1, 3), "sanity_hit_at_15": round(hit15, 3)},
        "build_s": {"generate_data": round(gen_ms / 1000, 2), "build_lexicon": round(lexicon_ms / 1000, 2),
                    "build_index": round(build_ms / 1000, 2), "generate_vectors": round(vec_gen_ms / 1000, 2),
                    "with_vectors": round(with_vectors_ms / 1000, 2), "with_prototypes": round(with_prototypes_ms / 1000, 3),
                    "index_total": round((lexicon_ms + build_ms + with_vectors_ms + with_prototypes_ms) / 1000, 2)},
        "memory_mb": {"rss_at_start": round(rss_start, 1), "rss_before_build": round(rss_before, 1),
                      "rss_after_sparse_index": round(rss_after_sparse, 1), "rss_after_dense": round(rss_after, 1),
                      "rss_index_delta": round(rss_after - rss_before, 1), "peak_rss_process": round(peak_rss_mb(), 1),
                      "index_array_bytes_mb": round(array_bytes(index) / 2**20, 1)},
        "prefilter": summary(e2e),
        "prefilter_analysed": summary(pre_analysed),
        "target_p50_ms": target,
        "ratio_p50_to_target": round(p50_e2e / target, 2),
        "stages_p50_ms": {**stage_p50, "sparse (plan + signals)": round(statistics.median(sparse_total), 3)},
        "stages_p95_ms": {s: round(percentile(samples, 0.95), 3) for s, samples in stages.items()},
        "dense_detail_p50_ms": detail_p50,
    }
    if learned_report is not None:
        report["learned"] = learned_report
    if build_profile:
        report["build_index_profile_top"] = build_profile
    if query_profile:
        report["query_profile_top"] = query_profile
    return report


def attach_learned_traffic(name: str, generator: Generator, data: Synthetic, index, space: VectorSpace,
                           weights: FusionWeights, args):
    """Log --learned-searches searches, aggregate them with the product's code (timed) and attach
    the learned pairs that count to `index` (module docstring). Returns (index, weights, report)."""
    import tempfile

    from ops.bench_traffic import aggregate_traffic, analytics_engine, log_traffic, utc_now
    from search.learned import CountingRule, build_learned_memory, eligible, normalised_query, unrelated_cosine

    rng = generator.rng
    popularity = rng.permutation(len(data.tasks))
    sampler = ZipfSampler(len(data.tasks), 0.7, rng)
    gold_rows = popularity[sampler.draw(args.learned_queries)]
    pool = [generator.query(int(g), data.task_topics, data.task_category, generator.category_words, typo_rate=0.2)
            for g in gold_rows]
    pool_vectors = space.around(np.asarray(gold_rows, dtype=np.int64), noise=1.4)
    ranked_ms, ranked = timed(lambda: [[s.task.id for s in prefilter(index, q, weights, k=10, restrict_roles=False,
                                                                     query_vector=pool_vectors[i]).ranked]
                                       for i, q in enumerate(pool)])
    settings = Settings().with_overrides(learning_settle_s=0.0)
    workdir = Path(tempfile.mkdtemp(prefix="taskfinder-bench-learned-"))
    engine = analytics_engine(workdir)
    now = utc_now()
    traffic = log_traffic(engine, pool, [data.tasks[int(g)].id for g in gold_rows], ranked, args.learned_searches,
                          args.learned_sessions, 30.0, now, args.seed)
    print(f"[{name}] logged {traffic.searches} searches ({traffic.clicks} clicks) in {traffic.write_s:.1f} s",
          file=sys.stderr)
    aggregate_took, aggregated, pairs = aggregate_traffic(engine, settings, now)
    exemplars = eligible(pairs, CountingRule(settings.learning_min_sessions, settings.learning_min_relevance,
                                             majority_sessions=settings.learning_majority_sessions),
                         task_ids=[t.id for t in data.tasks])
    vector_of = {normalised_query(q): pool_vectors[i] for i, q in enumerate(pool)}
    if args.learned_as == "cases":
        build_took, index = timed(lambda: learned_as_cases(data, index, space, exemplars, vector_of))
        print(f"[{name}] learned exemplars as cases: {len(index.exemplars.texts)} exemplars, index built in "
              f"{build_took / 1000:.1f} s", file=sys.stderr)
    # as cases, no separate learned memory: the fit's CV gave the signal weight 0 (simulator runs)
    memory = build_learned_memory([t.id for t in index.tasks], () if args.learned_as == "cases" else exemplars)
    if memory is not None:
        fallback = space.around(np.asarray(memory.task_rows, dtype=np.int64), noise=1.4)
        vectors = np.stack([vector_of.get(text, fallback[j]) for j, text in enumerate(memory.texts)]).astype(np.float32)
        floor = unrelated_cosine(index.exemplars.vectors, index.exemplars.task_rows)   # as attach_vectors does
        index = index.with_learned(memory.with_vectors(vectors, floor))
    weights = FusionWeights(replace(weights.full, learned=args.learned_weight), weights.sparse)
    gold_of = {normalised_query(q): data.tasks[int(g)].id for q, g in zip(pool, gold_rows)}
    correct = sum(1 for e in exemplars if gold_of.get(e.query) == e.task_id)
    engine.dispose()
    report = {"searches": traffic.searches, "sessions": traffic.sessions, "distinct_queries": traffic.distinct_queries,
              "impressions": traffic.impressions, "clicks": traffic.clicks, "log_write_s": traffic.write_s,
              "rank_pool_s": round(ranked_ms / 1000, 2),
              "aggregate_s": aggregate_took, "aggregate": {k: v for k, v in aggregated.items()
                                                                           if k != "propensities"},
              "propensities": aggregated.get("propensities"),
              "learned_pairs": len(pairs), "eligible_pairs": len(exemplars),
              "eligible_pairs_on_gold": correct,
              "learned_memory_exemplars": 0 if memory is None else len(memory.texts)}
    print(f"[{name}] aggregation {aggregate_took}: {len(pairs)} pairs, {len(exemplars)} eligible",
          file=sys.stderr)
    return index, weights, report


def learned_as_cases(data: Synthetic, index, space: VectorSpace, exemplars, vector_of: dict):
    """The served index when the fit takes the learned exemplars as cases
    (search.fitting.choose_learned_as_cases; SearchService._build): built from the written and
    the learned cases, with the written-cases-only `index` kept beside it for
    contributions.learned. Written exemplars keep their vectors, a learned one gets its traffic
    query's vector; prototypes as for the written index."""
    from search.learned import learned_cases, trusted_cases

    cases = [*data.cases, *learned_cases(exemplars)]
    union = build_index(data.tasks, build_lexicon(cases), FieldWeights(), cases=cases)
    memory = index.exemplars
    known = {(text, int(row)): memory.vectors[j] for j, (text, row) in enumerate(zip(memory.texts, memory.task_rows))}
    rows = np.asarray(union.exemplars.task_rows, dtype=np.int64)
    fresh = space.around(rows, noise=1.4)
    vectors = np.stack([known.get((text, int(row)), vector_of.get(text, fresh[j]))
                        for j, (text, row) in enumerate(zip(union.exemplars.texts, rows))]).astype(np.float32)
    union = union.with_vectors(index.task_vectors, vectors, memory.oos_vectors)
    noise = 0.5 * unit(space.rng.standard_normal(union.exemplars.centroids.shape, dtype=np.float32))
    union = union.with_prototypes((20.0 * (union.exemplars.centroids + noise)).astype(np.float32)).with_written(index)
    # no verified person behind the bench's pairs (its traffic is anonymous): the written index
    # bounds them (search.index.SearchIndex.trusted), and every query is scored by both
    return union.with_trusted(index) if trusted_cases(exemplars) is not None else union


def print_table(reports: list[dict]) -> None:
    print()
    header = f"{'':38s}" + "".join(f"{r['scale'] + ' (' + str(r['data']['tasks']) + 't/' + str(r['data']['cases']) + 'c)':>24s}" for r in reports)
    print(header)
    print("-" * len(header))

    def line(label, values):
        print(f"{label:38s}" + "".join(f"{v:>24s}" for v in values))

    line("prefilter p50 / p95 (ms)", [f"{r['prefilter']['p50_ms']:.2f} / {r['prefilter']['p95_ms']:.2f}" for r in reports])
    line("target p50 (ms) / ratio", [f"{r['target_p50_ms']:.0f} / {r['ratio_p50_to_target']:.2f}x" for r in reports])
    line("prefilter (pre-analysed) p50/p95", [f"{r['prefilter_analysed']['p50_ms']:.2f} / {r['prefilter_analysed']['p95_ms']:.2f}" for r in reports])
    for stage in reports[0]["stages_p50_ms"]:
        line(f"  stage p50: {stage}", [f"{r['stages_p50_ms'].get(stage, float('nan')):.3f}" for r in reports])
    for piece in reports[0]["dense_detail_p50_ms"]:
        line(f"  dense: {piece}", [f"{r['dense_detail_p50_ms'].get(piece, float('nan')):.3f}" for r in reports])
    line("build_lexicon + build_index (s)", [f"{r['build_s']['build_lexicon']:.1f} + {r['build_s']['build_index']:.1f}" for r in reports])
    line("with_vectors + with_prototypes (s)", [f"{r['build_s']['with_vectors']:.2f} + {r['build_s']['with_prototypes']:.3f}" for r in reports])
    line("index RSS delta / arrays (MB)", [f"{r['memory_mb']['rss_index_delta']:.0f} / {r['memory_mb']['index_array_bytes_mb']:.0f}" for r in reports])
    line("peak RSS of process (MB)", [f"{r['memory_mb']['peak_rss_process']:.0f}" for r in reports])
    if all("learned" in r for r in reports):
        line("learned: searches / eligible pairs", [f"{r['learned']['searches']} / {r['learned']['eligible_pairs']}"
                                                     for r in reports])
        line("learned: aggregation wall/cpu (s)", [f"{r['learned']['aggregate_s']['wall_s']:.1f} / "
                                                   f"{r['learned']['aggregate_s']['cpu_s']:.1f}" for r in reports])
    line("sanity Hit@1 / Hit@15", [f"{r['data']['sanity_hit_at_1']:.2f} / {r['data']['sanity_hit_at_15']:.2f}" for r in reports])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=("small", "large", "both"), default="both")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the queries")
    parser.add_argument("--vocab", type=int, default=20_000, help="synthetic vocabulary size")
    parser.add_argument("--profile", action="store_true", help="cProfile the query loop")
    parser.add_argument("--profile-build", action="store_true", help="cProfile build_index (an extra build)")
    parser.add_argument("--blas-threads", default="env",
                        help="BLAS threads (sets OPENBLAS/OMP/MKL_NUM_THREADS before numpy loads); 'env': leave as is")
    parser.add_argument("--json", type=Path, help="also write the JSON summary here")
    parser.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                        help="wall: elapsed time; cpu: this thread's CPU time (a shared, overloaded machine; "
                             "use with --blas-threads 1)")
    parser.add_argument("--learned-searches", type=int, default=0,
                        help="log this many searches with clicks, aggregate them into learned evidence and rank "
                             "with it (issue 16: 100000); 0: no learned evidence")
    parser.add_argument("--learned-weight", type=float, default=1.0,
                        help="the learned signal's fusion weight (0: as when the fit gives it none)")
    parser.add_argument("--learned-queries", type=int, default=3000, help="distinct queries of that traffic")
    parser.add_argument("--learned-as", choices=("cases", "signal"), default="cases",
                        help="the eligible pairs join the cases (the fit's choice in the simulator runs; the "
                             "written-only index is kept for contributions.learned) or feed the `learned` signal")
    parser.add_argument("--learned-sessions", type=int, default=20000, help="sessions of that traffic")
    args = parser.parse_args()
    global _clock
    _clock = CLOCK[args.clock]

    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"warning: load average {load_before:.1f} on {os.cpu_count()} cores: other processes compete for the CPU "
              "(multi-threaded BLAS suffers most; see --blas-threads)", file=sys.stderr)
    names = ["small", "large"] if args.scale == "both" else [args.scale]
    reports = []
    for name in names:
        spec = SCALES[name]
        reports.append(run_scale(name, spec["tasks"], spec["cases"], spec["target_p50_ms"], args))
        gc.collect()
    out = {"benchmark": "prefilter at scale (synthetic data)", "python": sys.version.split()[0],
           "numpy": np.__version__, "cpu_count": os.cpu_count(), "cpu": cpu_description(),
           "blas_threads_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if k in os.environ},
           "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
           "seed": args.seed, "clock": args.clock, "scales": reports}
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    print_table(reports)
    print(f"cpu: {out['cpu'].get('model', '?')}, last-level cache {out['cpu'].get('last_level_cache', '?')}")


if __name__ == "__main__":
    main()

"""Prometheus metrics, registered on a registry owned by the app (no process-global state),
so tests and several app instances never collide. Served at GET /metrics.

Naming follows the Prometheus conventions: base units (`_seconds`), counters named without
`_total` (prometheus_client appends it), and no free text (queries, task names) in labels, so
every label has a small fixed set of values.

Under gunicorn each worker is its own process with its own counters. With
PROMETHEUS_MULTIPROC_DIR set (before Python starts: prometheus_client picks its value store at
import), every worker writes its samples to files in that directory and /metrics answers with
the sum over all workers (`MultiProcessCollector`), whichever worker serves the scrape. Gauges
describe one worker's own state (the index it serves, its breakers), so they keep one series per
live worker (`multiprocess_mode="liveall"`, a `pid` label) and dashboards aggregate them.

In multiprocess mode each write to a counter or histogram is a locked write to that file (a
lock, a process-id check, a packed double into the mmap: 1.3-2.7 µs, two of them per histogram
observation), and a cached type-ahead answer makes seven. The label children the request path
uses (`Metrics.bound`) therefore keep their observations in memory (`Tally`) and a thread of the
worker writes them every TALLY_FLUSH_S, summed: one write per counter and per histogram bucket
touched. A scrape writes its own worker's first; another worker's reach /metrics within
TALLY_FLUSH_S. Measured in one process, hot type-ahead requests through the WSGI app (the
ratio to the canned app, alternating blocks): 17 µs of 132 per request were these writes
(docs/design/performance.md).
"""
from __future__ import annotations

import atexit
import bisect
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector

from infra.multiprocess import drop_dead_processes

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: An index rebuild embeds every task: seconds on a warm cache, minutes on a cold one.
REBUILD_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
BREAKER_STATES = ("closed", "open", "half_open")
#: Re-rank outcomes known in advance, created at zero so that rate() has a series from the start.
RERANK_OUTCOMES = ("ok", "cache_hit", "rerank_unavailable", "rerank_invalid", "skipped_pinned", "skipped_confident")
EMBEDDING_OUTCOMES = ("ok", "error", "circuit_open")
RATE_LIMITS = ("search", "events", "login", "login_lockout", "login_account", "login_device")
#: The other label values known in advance, created at zero too: a dashboard panel or an alert on
#: a labelled counter shows 0 on a healthy system, not "No data" (a series that does not exist).
DEGRADED_FLAGS = ("embeddings_unavailable", "rerank_unavailable", "rerank_invalid")
RERANK_DROP_REASONS = ("malformed_json", "wrong_shape", "idx_out_of_range", "name_mismatch", "unknown_name",
                       "duplicate")   # rerank.validate
TOKEN_KINDS = ("prompt", "completion")
ANALYTICS_RECORDS = [(kind, outcome) for kind in ("search", "events")
                     for outcome in ("queued", "written", "dropped_full", "write_failed", "rejected")]   # analytics.recorder
#: Search latency by what the caller waits for: the instant type-ahead list (rerank=0) or the
#: re-ranked one (rerank=1, an LLM call); separate alerts, since their budgets differ 20-fold.
SEARCH_KINDS = ("typeahead", "rerank")
#: Endpoints whose server errors the 5xx ratio alert and the dashboard divide: at zero from the start.
ZEROED_REQUESTS = [("/api/search", "500"), ("/api/events", "500")]
PER_WORKER = "liveall"
#: Seconds between two writes of a worker's tallied observations to the multiprocess files.
TALLY_FLUSH_S = 0.5


def multiprocess_active() -> bool:
    """Whether prometheus_client stores values in PROMETHEUS_MULTIPROC_DIR files in this process
    (decided by the environment when prometheus_client was first imported)."""
    return bool(getattr(values.ValueClass, "_multiprocess", False))


class Tally:
    """The observations of one counter or histogram label child, kept in memory until `flush`
    writes them to the child summed: `inc(n)` adds n to a counter, `observe(x)` records x in a
    histogram. `flush` writes a counter once (the sum of its increments) and a histogram once
    per bucket it touched plus its sum, exactly what prometheus_client's own `observe` would
    have written one observation at a time (the bucket is the first upper bound >= x).
    Appending to a deque is atomic under the GIL: the request threads record without a lock,
    and a flush drains only what was there when it began."""

    __slots__ = ("child", "pending", "upper_bounds")

    def __init__(self, child):
        self.child = child
        self.pending: deque[float] = deque()
        # prometheus_client's Histogram child keeps its bounds, buckets and sum in these
        # attributes (0.26, pinned in requirements.txt; tests/test_metrics.py compares the two)
        self.upper_bounds = getattr(child, "_upper_bounds", None)

    def inc(self, amount: float = 1.0) -> None:
        self.pending.append(amount)

    def observe(self, amount: float) -> None:
        self.pending.append(amount)

    def flush(self) -> int:
        """Write what is pending to the child; returns how many observations that was."""
        pending = self.pending
        drained = [pending.popleft() for _ in range(len(pending))]
        if not drained:
            return 0
        if self.upper_bounds is None:
            self.child.inc(sum(drained))
            return len(drained)
        per_bucket: dict[int, int] = {}
        for amount in drained:
            bucket = bisect.bisect_left(self.upper_bounds, amount)
            per_bucket[bucket] = per_bucket.get(bucket, 0) + 1
        self.child._sum.inc(sum(drained))
        for bucket, count in per_bucket.items():
            self.child._buckets[bucket].inc(count)
        return len(drained)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, multiprocess_dir: Path | None = None,
                 tally: bool | None = None):
        """`tally`: keep the request path's observations in memory between writes (`Tally`);
        by default exactly when prometheus_client writes to multiprocess files."""
        self.registry = registry or CollectorRegistry()
        self.multiprocess_dir = self._checked_multiprocess_dir(multiprocess_dir)  # before any metric exists
        self.tally = multiprocess_active() if tally is None else tally
        self._tallies: list[Tally] = []
        self._flusher: threading.Thread | None = None
        self._flush_lock = threading.Lock()
        r = self.registry
        # RED, for every endpoint (web.request_metrics records them around each request)
        self.requests = Counter("taskfinder_http_requests", "HTTP requests by route template and status",
                                ["endpoint", "status"], registry=r)
        self.request_seconds = Histogram("taskfinder_http_request_duration_seconds",
                                         "HTTP request duration by route template and status",
                                         ["endpoint", "status"], buckets=LATENCY_BUCKETS, registry=r)
        # the search pipeline
        self.stage_seconds = Histogram("taskfinder_stage_seconds", "Time spent per search pipeline stage",
                                       ["stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.search_seconds = Histogram("taskfinder_search_duration_seconds",
                                        "Search pipeline time by kind: typeahead (rerank=0) or rerank (rerank=1)",
                                        ["kind"], buckets=LATENCY_BUCKETS, registry=r)
        self.degraded = Counter("taskfinder_degraded_responses", "Search responses served degraded, by flag",
                                ["flag"], registry=r)
        self.answer_cache = Counter("taskfinder_answer_cache_lookups",
                                    "Lookups of finished answers without re-ranking (serving.answer_cache), "
                                    "by result (hit, miss)", ["result"], registry=r)
        self.zero_results = Counter("taskfinder_zero_result_searches", "Searches that returned no result",
                                    registry=r)
        self.no_confident_match = Counter("taskfinder_no_confident_match_searches",
                                          "Searches answered 'no confident match' by the abstention model",
                                          registry=r)
        # LLM re-ranking
        self.rerank_calls = Counter("taskfinder_rerank_calls", "LLM re-rank attempts by outcome",
                                    ["outcome"], registry=r)
        self.rerank_dropped = Counter("taskfinder_rerank_dropped_entries",
                                      "LLM answer entries dropped by validation, by reason",
                                      ["reason"], registry=r)
        self.rerank_tokens = Counter("taskfinder_rerank_tokens", "LLM tokens spent", ["kind"], registry=r)
        # embeddings
        self.embedding_calls = Counter("taskfinder_embedding_calls", "Calls to the embedding back end by outcome",
                                       ["outcome"], registry=r)
        self.embedding_cache = Counter("taskfinder_embedding_cache_lookups",
                                       "Embedding cache lookups per text, by result (hit, miss)",
                                       ["result"], registry=r)
        # abuse protection (web.limits, admin.throttle)
        self.ratelimited = Counter("taskfinder_ratelimited_responses",
                                   "Requests refused with 429 by a per-client rate limit or the login lockout, by limit",
                                   ["limit"], registry=r)
        self.ratelimit_backend_errors = Counter("taskfinder_ratelimit_backend_errors",
                                                "Rate-limit and login-throttle decisions taken without Redis "
                                                "(unreachable, or its circuit open)", registry=r)
        # circuit breakers (infra.breaker): 1 for the breaker's current state, 0 for the others
        self.breaker_state = Gauge("taskfinder_circuit_breaker_state",
                                   "Circuit breaker state as of its last use (1 = current state)",
                                   ["breaker", "state"], multiprocess_mode=PER_WORKER, registry=r)
        # the index and the catalog
        self.index_rebuilds = Counter("taskfinder_index_rebuilds", "Search index rebuilds", registry=r)
        self.index_rebuild_seconds = Histogram("taskfinder_index_rebuild_duration_seconds",
                                               "Search index rebuild duration (task embedding included)",
                                               buckets=REBUILD_BUCKETS, registry=r)
        self.index_tasks = Gauge("taskfinder_index_tasks", "Tasks in the live search index",
                                 multiprocess_mode=PER_WORKER, registry=r)
        self.lexicon_links = Gauge("taskfinder_lexicon_links", "(term, task) links in the rationale lexicon",
                                   multiprocess_mode=PER_WORKER, registry=r)
        self.catalog_revision = Gauge("taskfinder_catalog_revision",
                                      "Catalog store revision, as last read by this worker",
                                      multiprocess_mode=PER_WORKER, registry=r)
        self.index_revision = Gauge("taskfinder_index_revision",
                                    "Catalog revision the live search index was built from",
                                    multiprocess_mode=PER_WORKER, registry=r)
        self.index_built = Gauge("taskfinder_index_last_build_timestamp_seconds",
                                 "Unix time the live search index was built",
                                 multiprocess_mode=PER_WORKER, registry=r)
        self.ranker_fit_id = Gauge("taskfinder_ranker_fit_id",
                                   "Id of the stored ranker fit in use (0: the shipped defaults)",
                                   multiprocess_mode=PER_WORKER, registry=r)
        # search analytics (analytics.recorder): records queued, written, or lost (queue full, write failed)
        self.analytics_records = Counter("taskfinder_analytics_records",
                                         "Search-log and event records by kind and outcome", ["kind", "outcome"],
                                         registry=r)
        self._children: dict[tuple, object] = {}   # bound(): label children, bound once each
        self._zero(self.rerank_calls, RERANK_OUTCOMES)
        self._zero(self.embedding_calls, EMBEDDING_OUTCOMES)
        self._zero(self.embedding_cache, ("hit", "miss"))
        self._zero(self.answer_cache, ("hit", "miss"))
        self._zero(self.ratelimited, RATE_LIMITS)
        self._zero(self.degraded, DEGRADED_FLAGS)
        self._zero(self.rerank_dropped, RERANK_DROP_REASONS)
        self._zero(self.rerank_tokens, TOKEN_KINDS)
        self._zero(self.search_seconds, SEARCH_KINDS)
        for kind, outcome in ANALYTICS_RECORDS:
            self.analytics_records.labels(kind, outcome)
        for endpoint, status in ZEROED_REQUESTS:
            self.requests.labels(endpoint, status)

    @staticmethod
    def _checked_multiprocess_dir(directory: Path | None) -> Path | None:
        """The directory to aggregate from, or None (serve this registry). A directory configured
        after prometheus_client was imported would aggregate files nobody writes: say so."""
        if directory is None:
            return None
        if not multiprocess_active():
            log.warning("PROMETHEUS_MULTIPROC_DIR=%s was not in the environment when prometheus_client "
                        "was imported; serving this process's metrics only", directory)
            return None
        directory.mkdir(parents=True, exist_ok=True)  # prometheus_client opens its files there at once
        return directory

    @staticmethod
    def _zero(counter: Counter | Histogram, label_values: Iterable[str]) -> None:
        for value in label_values:
            counter.labels(value)

    # -- exposition ----------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The text format for GET /metrics: every worker's samples in multiprocess mode,
        this app's registry otherwise."""
        self.flush()
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        drop_dead_processes(self.multiprocess_dir)
        aggregate = CollectorRegistry()
        MultiProcessCollector(aggregate, path=str(self.multiprocess_dir))
        return generate_latest(aggregate)

    # -- recording helpers ---------------------------------------------------------------
    def bound(self, metric, *values: str):
        """`metric.labels(*values)` (the metric itself when it has no labels), bound once per
        label set (labels() costs more than the write it prepares; every label set here is small
        and fixed, so the memo stays small); a `Tally` of it when this object tallies."""
        key = (id(metric), values)   # the metrics live as long as this object
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._bind(metric, values)
        return child

    def _bind(self, metric, values: tuple[str, ...]):
        child = metric.labels(*values) if values else metric
        if not self.tally:
            return child
        tally = Tally(child)
        with self._flush_lock:
            self._tallies.append(tally)
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_every, name="metrics-tally", daemon=True)
                self._flusher.start()
                atexit.register(self.flush)   # a worker's graceful exit writes its last observations
        return tally

    def _flush_every(self) -> None:
        while True:
            time.sleep(TALLY_FLUSH_S)
            try:
                self.flush()
            except Exception:  # a metrics write must never end the thread that makes them
                log.exception("writing the tallied metrics failed")

    def flush(self) -> int:
        """Write every tallied observation (a scrape, the flush thread, a worker's exit);
        returns how many there were."""
        with self._flush_lock:
            return sum(tally.flush() for tally in self._tallies)

    def observe_request(self, endpoint: str, status: int, seconds: float | None) -> None:
        self.bound(self.requests, endpoint, str(status)).inc()
        if seconds is not None:
            self.bound(self.request_seconds, endpoint, str(status)).observe(seconds)

    def record_index_build(self, live, lexicon_links: int, seconds: float) -> None:
        """One finished rebuild of the search index (`live`: a serving.service.LiveIndex)."""
        self.index_rebuilds.inc()
        self.index_rebuild_seconds.observe(seconds)
        self.index_tasks.set(len(live.index.tasks))
        self.lexicon_links.set(lexicon_links)
        self.index_revision.set(live.revision)
        self.index_built.set(time.time())
        self.ranker_fit_id.set(live.params.fit_id or 0)

    def analytics_listener(self) -> Callable[[str, str, int], None]:
        """An analytics.recorder.AnalyticsRecorder `on_count` callback."""
        def on_count(kind: str, outcome: str, n: int) -> None:
            self.bound(self.analytics_records, kind, outcome).inc(n)
        return on_count

    def breaker_listener(self, breaker: str) -> Callable[[str], None]:
        """A infra.breaker.CircuitBreaker `on_change` callback keeping the state gauge of `breaker`."""
        def on_change(state: str) -> None:
            for known in BREAKER_STATES:
                self.breaker_state.labels(breaker, known).set(1 if known == state else 0)
        return on_change

    def embedding_observer(self) -> "EmbeddingObserver":
        return EmbeddingObserver(self)


class EmbeddingObserver:
    """search.embeddings.CachedEmbedder's metrics hooks: cache hits/misses and back-end calls."""

    def __init__(self, metrics: Metrics):
        self._metrics = metrics

    def cache_lookups(self, hits: int, misses: int) -> None:
        if hits:
            self._metrics.embedding_cache.labels("hit").inc(hits)
        if misses:
            self._metrics.embedding_cache.labels("miss").inc(misses)

    def call(self, outcome: str) -> None:
        self._metrics.embedding_calls.labels(outcome).inc()

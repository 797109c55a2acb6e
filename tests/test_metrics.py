"""The runtime metrics (infra/metrics.py, web/request_metrics.py): RED for every endpoint, the search outcomes, the index
and catalog gauges, circuit-breaker states and the embedding cache, under Prometheus names."""
from __future__ import annotations

import diskcache
import numpy as np
import pytest

from infra.metrics import Metrics
from infra.breaker import CircuitBreaker
from search.embeddings import CachedEmbedder, EmbeddingUnavailable


def value(app_or_metrics, name: str, **labels) -> float:
    metrics = getattr(app_or_metrics, "extensions", None)
    registry = (metrics["taskfinder"].metrics if metrics else app_or_metrics).registry
    return registry.get_sample_value(name, labels) or 0.0


def test_every_endpoint_is_counted_and_timed_by_route_template(demo_app, client):
    before = {path: value(demo_app, "taskfinder_http_requests_total", endpoint=path, status=status)
              for path, status in (("/healthz", "200"), ("unmatched", "404"), ("/api/search", "400"))}
    client.get("/healthz")
    client.get("/no/such/page?q=secret")
    client.get("/api/search", query_string={"q": ""})
    assert value(demo_app, "taskfinder_http_requests_total", endpoint="/healthz", status="200") == before["/healthz"] + 1
    assert value(demo_app, "taskfinder_http_requests_total", endpoint="unmatched", status="404") == before["unmatched"] + 1
    assert value(demo_app, "taskfinder_http_requests_total", endpoint="/api/search", status="400") == before["/api/search"] + 1
    assert value(demo_app, "taskfinder_http_request_duration_seconds_count", endpoint="/healthz", status="200") >= 1
    assert "secret" not in client.get("/metrics").get_data(as_text=True)  # no query text in any label


def test_search_outcomes_and_index_gauges(demo_app, client):
    """(The abstention counter with a fitted model: tests/test_api.py, fitted-ranker test.)"""
    live = demo_app.extensions["taskfinder"].search.live()
    before = value(demo_app, "taskfinder_stage_seconds_count", stage="total")
    client.get("/api/search", query_string={"q": "hearing and vision screening"})
    assert value(demo_app, "taskfinder_stage_seconds_count", stage="total") == before + 1
    assert value(demo_app, "taskfinder_index_tasks") == 200
    assert value(demo_app, "taskfinder_index_revision") == live.revision == value(demo_app, "taskfinder_catalog_revision")
    assert value(demo_app, "taskfinder_index_last_build_timestamp_seconds") > 1e9
    assert value(demo_app, "taskfinder_ranker_fit_id") == (live.params.fit_id or 0)
    assert value(demo_app, "taskfinder_index_rebuild_duration_seconds_count") >= 1
    lookups = sum(value(demo_app, "taskfinder_embedding_cache_lookups_total", result=r) for r in ("hit", "miss"))
    assert lookups >= 200  # every task was looked up when the index was built
    assert value(demo_app, "taskfinder_circuit_breaker_state", breaker="embeddings", state="closed") == 1


def test_breaker_state_gauge_follows_every_transition():
    now = [0.0]
    metrics = Metrics()
    breaker = CircuitBreaker(2, 10.0, clock=lambda: now[0], on_change=metrics.breaker_listener("llm"))

    def states():
        return {s: value(metrics, "taskfinder_circuit_breaker_state", breaker="llm", state=s)
                for s in ("closed", "open", "half_open")}

    assert states() == {"closed": 1, "open": 0, "half_open": 0}
    breaker.record_failure()
    breaker.record_failure()
    assert states() == {"closed": 0, "open": 1, "half_open": 0}
    now[0] = 11.0
    assert breaker.allow()
    assert states() == {"closed": 0, "open": 0, "half_open": 1}
    breaker.record_success()
    assert states() == {"closed": 1, "open": 0, "half_open": 0}


class Flaky:
    model = "fake"

    def __init__(self):
        self.fail = False

    def embed(self, texts, kind):
        if self.fail:
            raise EmbeddingUnavailable("down")
        return np.ones((len(texts), 2), dtype=np.float32)


def test_embedding_observer_counts_hits_misses_and_calls_without_changing_results(tmp_path):
    metrics, inner = Metrics(), Flaky()
    embedder = CachedEmbedder(inner, diskcache.Cache(str(tmp_path)), CircuitBreaker(1, 60.0),
                              metrics.embedding_observer())
    assert embedder.embed(["a", "b"], "query").shape == (2, 2)
    assert embedder.embed(["a", "c"], "query").shape == (2, 2)
    inner.fail = True
    for _ in range(2):
        with pytest.raises(EmbeddingUnavailable):
            embedder.embed(["d"], "query")
    counts = {(name, label): value(metrics, name, **{key: label})
              for name, key, labels in (("taskfinder_embedding_cache_lookups_total", "result", ("hit", "miss")),
                                        ("taskfinder_embedding_calls_total", "outcome", ("ok", "error", "circuit_open")))
              for label in labels}
    assert counts == {("taskfinder_embedding_cache_lookups_total", "hit"): 1,
                      ("taskfinder_embedding_cache_lookups_total", "miss"): 5,
                      ("taskfinder_embedding_calls_total", "ok"): 2,
                      ("taskfinder_embedding_calls_total", "error"): 1,
                      ("taskfinder_embedding_calls_total", "circuit_open"): 1}


def test_tallied_observations_reach_the_registry_as_if_written_one_by_one():
    """In multiprocess mode the request path's counters and histograms are tallied in memory and
    written summed (infra.metrics.Tally): after a flush, the registry holds exactly what writing
    each observation at once would have written, every bucket and sum; before it, nothing."""
    direct, tallied = Metrics(tally=False), Metrics(tally=True)
    latencies = [0.0004, 0.001, 0.0011, 0.003, 0.003, 0.049, 0.05, 0.7, 12.0, 45.0, 0.0]
    for metrics in (direct, tallied):
        for seconds in latencies:
            metrics.observe_request("/api/search", 200, seconds)
            metrics.bound(metrics.stage_seconds, "total").observe(seconds)
        metrics.bound(metrics.zero_results).inc()
        metrics.bound(metrics.answer_cache, "hit").inc(3)

    def samples(metrics):
        return sorted((s.name, tuple(sorted(s.labels.items())), s.value)
                      for family in metrics.registry.collect() for s in family.samples
                      if not s.name.endswith("_created"))

    assert value(tallied, "taskfinder_http_requests_total", endpoint="/api/search", status="200") == 0
    assert tallied.flush() == 3 * len(latencies) + 2   # a count and two histograms per latency, two counters
    assert samples(tallied) == samples(direct)
    assert value(tallied, "taskfinder_stage_seconds_bucket", stage="total", le="0.001") == 3   # 0.0, 0.0004 and 0.001 (cumulative)
    assert tallied.flush() == 0   # nothing is written twice


def test_a_scrape_writes_its_own_tallies_first():
    metrics = Metrics(tally=True)
    metrics.observe_request("/healthz", 200, 0.002)
    assert 'taskfinder_http_requests_total{endpoint="/healthz",status="200"} 1.0' in metrics.exposition().decode()

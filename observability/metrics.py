"""Prometheus metrics, registered on a registry owned by the app (no process-global state),
so tests and several app instances never collide. Served at GET /metrics."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.requests = Counter("taskfinder_search_requests", "Search API requests by outcome",
                                ["endpoint", "status"], registry=self.registry)
        self.stage_seconds = Histogram("taskfinder_stage_seconds", "Time spent per pipeline stage",
                                       ["stage"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.degraded = Counter("taskfinder_degraded", "Responses served degraded, by flag",
                                ["flag"], registry=self.registry)
        self.rerank_calls = Counter("taskfinder_rerank_calls", "LLM re-rank attempts by result",
                                    ["result"], registry=self.registry)
        self.rerank_dropped = Counter("taskfinder_rerank_dropped_entries",
                                      "LLM answer entries dropped by validation, by reason",
                                      ["reason"], registry=self.registry)
        self.rerank_tokens = Counter("taskfinder_rerank_tokens", "LLM tokens spent", ["kind"],
                                     registry=self.registry)
        self.zero_results = Counter("taskfinder_zero_result_searches",
                                    "Searches that returned no result", registry=self.registry)
        self.index_rebuilds = Counter("taskfinder_index_rebuilds", "Search index rebuilds",
                                      registry=self.registry)
        self.index_tasks = Gauge("taskfinder_index_tasks", "Tasks in the live search index",
                                 registry=self.registry)
        self.lexicon_links = Gauge("taskfinder_lexicon_links", "(term, task) links in the rationale lexicon",
                                   registry=self.registry)

"""The search service and what it is built from, without a web framework: the one place they are
built. `create_app` (app.py) builds them and adds the HTTP side and the admin accounts; `app.py
search` (cli.search) builds them alone, since a one-shot search from the shell serves nothing
over HTTP and Flask's and werkzeug's imports were a tenth of its time (issue 44 item 9).
"""
from __future__ import annotations

from dataclasses import dataclass

from catalog.db import make_engine
from catalog.store import CatalogStore
from infra.breaker import CircuitBreaker
from infra.cache import HealingCache
from infra.metrics import Metrics
from rerank import Reranker
from search.embeddings import build_embedder
from serving.service import SearchService
from settings import Settings


@dataclass(frozen=True)
class SearchParts:
    settings: Settings
    store: CatalogStore
    search: SearchService
    metrics: Metrics
    cache: HealingCache


def build_search(settings: Settings, audit=None) -> SearchParts:
    """The store on DATABASE_URL, the caches, the metrics, the embedder and re-ranker the settings
    ask for, and the search service over them. `audit(session, change)`: what the store calls
    for every published change (admin.audit.record, where the app publishes changes; None for
    a caller that only reads)."""
    engine = make_engine(settings.database)
    store = CatalogStore(engine, audit=audit)
    metrics = Metrics(multiprocess_dir=settings.prometheus_multiproc_dir)
    cache = HealingCache(settings.cache_dir)
    reranker = Reranker(settings, cache, breaker=metered_breaker(settings, metrics, "llm")) \
        if settings.llm_base_url else None
    embedder = build_embedder(settings, cache, metered_breaker(settings, metrics, "embeddings"),
                              metrics.embedding_observer()) if settings.embeddings_enabled else None
    enrichment = None
    if settings.catalog_enrichment:   # kb/ (its index, its LLM client: ~0.25 s of imports) only then
        from kb.enrich import catalog_enrichment
        enrichment = catalog_enrichment(settings)
    search = SearchService(settings, store, embedder, reranker, metrics, enrichment=enrichment,
                           learned_evidence=lambda: learned_evidence(engine, settings))  # read at fit time only
    return SearchParts(settings, store, search, metrics, cache)


def learned_evidence(engine, settings: Settings):
    """What the use of the search taught (analytics.learning.fit_inputs), read when a fit runs:
    imported then, not when the app starts (~0.1 s; issue 44 item 9)."""
    from analytics.learning import fit_inputs
    return fit_inputs(engine, settings)


def metered_breaker(settings: Settings, metrics: Metrics, name: str) -> CircuitBreaker:
    """A circuit breaker from settings whose state shows in /metrics under `breaker=name`."""
    return CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s,
                          on_change=metrics.breaker_listener(name))

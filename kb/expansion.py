"""Query-side expansion (online): the LLM predicts evidence vocabulary the query lacks (SIRA),
the DF filter keeps terms with 1 <= df <= max_df * N in the enriched index, and one weighted
BM25 call scores BM25(q) + lambda * BM25(expansion). RM3 fills the same slot without an LLM.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from infra.breaker import CircuitBreaker
from kb.analysis import ngram_token
from kb.df import DEFAULT_MAX_DF, df_filter
from kb.index import Index
from kb.jobs import cache_key, cached_data, text_hash
from kb.llm import LLM, TERMS_SCHEMA, LLMError, query_messages

DEFAULT_LAMBDA = 0.3       # weight of the query-side expansion, BM25(q) + lambda * BM25(e)


@dataclass
class Expansion:
    source: str                                   # "llm" | "rm3" | "none"
    weights: dict[str, float] = field(default_factory=dict)   # token -> weight (already * lambda)
    kept: list[tuple[str, int]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""


def expansion_tokens(index: Index, phrase: str, view: str, exclude: set[str]) -> list[str]:
    """Tokens a kept phrase contributes: its unigrams (not in the query) that exist in the view,
    plus its atomic n-gram token when the index holds one."""
    parts = index.analyze(phrase)
    toks = [p for p in dict.fromkeys(parts) if p not in exclude and index.term_df(p, view) > 0]
    if len(parts) > 1 and index.term_df(ngram_token(parts), view) > 0:
        toks.append(ngram_token(parts))
    return toks


@dataclass(frozen=True)
class ExpansionSource:
    """Where a query's expansion comes from: the LLM client (None: the cache alone), the cache of
    its answers (None: none), the model named in the cache key, and the circuit breaker that
    stops calling an endpoint that keeps failing (None: always call)."""

    llm: LLM | None
    cache: object | None
    model: str
    breaker: CircuitBreaker | None = None


def llm_expansion(index: Index, query: str, source: ExpansionSource, mode: str = "fact_checking",
                  view: str = "enriched", max_df: float = DEFAULT_MAX_DF, lam: float = DEFAULT_LAMBDA) -> Expansion:
    """The LLM's expansion of `query` (cached), or none with a note when the LLM is absent or
    fails. Expansion runs on the search path, so `source.breaker` (the re-ranker's kind) stops
    calling an endpoint that keeps failing: during its cooldown a query costs no timeout at all.
    As for the re-ranker, only transport failures count; an answer that arrived unusable
    (LLMError) proves the endpoint is up."""
    llm, cache, model, breaker = source.llm, source.cache, source.model, source.breaker
    key = cache_key("query", model, mode, text_hash(query))
    data = cached_data(cache, key) if cache is not None else None
    if data is None:
        if llm is None:
            return Expansion("none", note="no LLM endpoint configured")
        if breaker is not None and not breaker.allow():
            return Expansion("none", note="LLM circuit open after repeated failures")
        try:
            reply = llm.complete_json(query_messages(mode, query), TERMS_SCHEMA, "terms")
        except LLMError as exc:
            if breaker is not None:
                breaker.record_success()
            return Expansion("none", note=f"LLM failed: {type(exc).__name__}: {str(exc)[:200]}")
        except Exception as exc:  # noqa: BLE001 - fall back to the plain query
            if breaker is not None:
                breaker.record_failure()
            return Expansion("none", note=f"LLM failed: {type(exc).__name__}: {str(exc)[:200]}")
        if breaker is not None:
            breaker.record_success()
        data = reply.data
        if cache is not None:
            cache.set(key, {"data": data, "prompt_tokens": reply.prompt_tokens,
                            "completion_tokens": reply.completion_tokens, "at": time.time()})
    qterms = set(index.analyze(query))
    res = df_filter(index, [t for t in data.get("terms", []) if isinstance(t, str)], max_df=max_df, min_df=1,
                    view=view, exclude_terms=qterms)
    weights: dict[str, float] = {}
    for phrase, _ in res.kept:
        for tok in expansion_tokens(index, phrase, view, qterms):
            weights[tok] = weights.get(tok, 0.0) + lam
    return Expansion("llm", weights, res.kept, res.dropped)


def rm3_expansion(index: Index, query_weights: Mapping[str, float], view: str = "text", fb_docs: int = 10,
                  fb_terms: int = 10, orig_weight: float = 0.5, max_df: float = 0.1) -> Expansion:
    """RM3 (Lavrenko & Croft relevance model, interpolated; Anserini defaults 10/10/0.5).

    P_fb(t) ∝ sum_{D in top fb_docs} score(D) * tf(t, D) / |D|, over terms passing the DF filter
    (df <= max_df * N; Anserini's RM3 likewise skips terms in over 10% of documents), top
    fb_terms kept and L1-normalised. Final weight = orig_weight * P(t|q) + (1 - orig_weight) * P_fb(t)
    with P(t|q) the L1-normalised query bag. Returned weights are the *whole* new query.
    """
    rows, scores = index.search_weighted(query_weights, fb_docs, view)
    if len(rows) == 0:
        return Expansion("rm3", dict(query_weights), note="no feedback documents")
    tf = index.view_matrix(view)[rows]
    core = index.core(view)
    dl = np.asarray(tf.sum(axis=1)).ravel()
    dl[dl == 0] = 1
    fb = np.zeros(tf.shape[1])
    for i in range(len(rows)):
        s, e = tf.indptr[i], tf.indptr[i + 1]
        np.add.at(fb, tf.indices[s:e], scores[i] * tf.data[s:e] / dl[i])
    cand = np.nonzero(fb)[0]
    cand = cand[core.df[cand] <= max_df * index.n_docs]
    cand = cand[np.argsort(-fb[cand], kind="stable")][:fb_terms]
    total_fb = fb[cand].sum() or 1.0
    qsum = sum(query_weights.values()) or 1.0
    weights = {t: orig_weight * w / qsum for t, w in query_weights.items()}
    kept = []
    for c in cand:
        tok = index.terms[c]
        weights[tok] = weights.get(tok, 0.0) + (1 - orig_weight) * fb[c] / total_fb
        kept.append((tok, int(core.df[c])))
    return Expansion("rm3", weights, kept)

"""Search modes over a named corpus, with per-term explanations (the BEIR-style evaluation of
those modes is evaluation/corpus.py, `python app.py corpus evaluate`).

Modes
  bm25         plain BM25 over the document text
  rm3          BM25 + RM3 pseudo-relevance feedback (no LLM)
  qe           BM25(q) + lambda * BM25(LLM expansion), text view        (needs an LLM endpoint)
  enriched     BM25 over text + SIRA enrichment postings                  (needs `corpus enrich`)
  enriched_qe  both sides: enriched view + LLM expansion                  (needs both)
  sage         BM25 over text + SAGE keyword postings                    (needs `corpus enrich --variant sage`)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from kb.analysis import ngram_token
from kb.df import DEFAULT_MAX_DF
from kb.expansion import DEFAULT_LAMBDA, Expansion, ExpansionSource, llm_expansion, rm3_expansion
from kb.jobs import open_cache
from kb.index import Index, published_version
from kb.llm import LLM
from kb.store import CorpusStore
from infra.breaker import CircuitBreaker

MODES = ("bm25", "rm3", "qe", "enriched", "enriched_qe", "sage")
VIEW_OF = {"bm25": "text", "rm3": "text", "qe": "text", "enriched": "enriched", "enriched_qe": "enriched",
           "sage": "sage"}
FIELD_OF = {"enriched": "enrich", "enriched_qe": "enrich", "sage": "sage"}
QUERY_LLM = {"qe", "enriched_qe"}


@dataclass
class KBConfig:
    prompt_mode: str = "fact_checking"
    max_df: float = DEFAULT_MAX_DF
    lam: float = DEFAULT_LAMBDA
    phrase_weight: float = 1.0     # weight of query bigrams that exist as injected n-gram tokens


class KB:
    """Loaded indexes (reloaded when their files change), the LLM and its cache."""

    def __init__(self, settings, llm: LLM | None = None, config: KBConfig | None = None, use_llm: bool = True):
        self.settings = settings
        self.store = CorpusStore(settings.data_dir)
        self.llm = llm if llm is not None else (LLM.from_settings(settings) if use_llm else None)
        # Query expansion calls the LLM per search: a dead endpoint must cost one timeout per
        # cooldown, not one per query (the re-ranker's rule, with the same settings).
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)
        self.config = config or KBConfig()
        self._cache = None
        self._loaded: dict[str, tuple[Path | None, Index, dict[str, str]]] = {}

    @property
    def cache(self):
        if self._cache is None:
            self._cache = open_cache(self.settings.cache_dir)
        return self._cache

    def index(self, name: str) -> tuple[Index, dict[str, str]]:
        # Each save publishes a new version folder behind the `index` link (Index.save), so the
        # folder the link names says whether the loaded index is still the current one.
        link = self.store.require(name) / "index"
        hit = self._loaded.get(name)
        if hit is None or hit[0] != published_version(link):
            index = Index.load(link)
            titles = {d.id: d.title for d in self.store.documents(name)}
            hit = self._loaded[name] = (index.version, index, titles)
        return hit[1], hit[2]

    def unavailable(self, name: str, mode: str) -> str | None:
        """Why `mode` cannot run on this corpus now (None when it can)."""
        if mode not in MODES:
            return f"unknown mode {mode!r}; one of {', '.join(MODES)}"
        index, _ = self.index(name)
        if mode in QUERY_LLM and self.llm is None:
            return "no LLM endpoint configured (LLM_BASE_URL)"
        field = FIELD_OF.get(mode)
        if field and not index.has_field(field):
            variant = "sage" if field == "sage" else "sira"
            return f"corpus has no {field} postings: run `corpus enrich --name {name} --variant {variant}`"
        return None

    def weighted_query(self, index: Index, query: str, mode: str) -> tuple[dict[str, float], dict[str, str], Expansion | None]:
        view = VIEW_OF[mode]
        weights = index.query_weights(query)
        sources = {t: "query" for t in weights}
        exp = None
        if view != "text":
            parts = index.analyze(query)
            for a, b in zip(parts, parts[1:]):
                tok = ngram_token((a, b))
                if index.term_df(tok, view) > 0:
                    weights[tok] = weights.get(tok, 0.0) + self.config.phrase_weight
                    sources.setdefault(tok, "phrase")
        if mode == "rm3":
            exp = rm3_expansion(index, weights, view)
            for t in exp.weights:
                sources.setdefault(t, "rm3")
            return exp.weights, sources, exp
        if mode in QUERY_LLM:
            exp = llm_expansion(index, query,
                                ExpansionSource(self.llm, self.cache, self.settings.llm_model, self.breaker),
                                self.config.prompt_mode, view, self.config.max_df, self.config.lam)
            for t, w in exp.weights.items():
                weights[t] = weights.get(t, 0.0) + w
                sources.setdefault(t, "expansion")
        return weights, sources, exp

    def ranking(self, name: str, query: str, mode: str, k: int) -> list[str]:
        index, _ = self.index(name)
        weights, _, _ = self.weighted_query(index, query, mode)
        rows, _ = index.search_weighted(weights, k, VIEW_OF[mode])
        return [index.doc_ids[r] for r in rows]

    def search(self, name: str, query: str, k: int = 10, mode: str = "bm25", explain: bool = True) -> dict:
        started = time.perf_counter()
        index, titles = self.index(name)
        view = VIEW_OF[mode]
        weights, sources, exp = self.weighted_query(index, query, mode)
        rows, scores = index.search_weighted(weights, k, view)
        core = index.core(view)
        results = []
        for rank, (r, s) in enumerate(zip(rows, scores), 1):
            item = {"rank": rank, "id": index.doc_ids[r], "title": titles.get(index.doc_ids[r], ""),
                    "score": round(float(s), 6)}
            results.append(item)
        if explain and len(rows):
            terms = list(weights)
            per_term = {t: core.term_doc_weight(index.vocab[t], rows) for t in terms if t in index.vocab}
            for i, item in enumerate(results):
                matched = []
                for t in terms:
                    wv = per_term.get(t)
                    if wv is not None and wv[i] > 0:
                        matched.append({"term": t, "source": sources.get(t, "query"),
                                        "df": int(core.df[index.vocab[t]]), "weight": round(weights[t], 6),
                                        "contribution": round(float(weights[t] * wv[i]), 6)})
                item["matched"] = sorted(matched, key=lambda m: -m["contribution"])
        out = {"corpus": name, "mode": mode, "view": view, "k": k, "n_docs": index.n_docs,
               "query_terms": [{"term": t, "source": sources.get(t, "query"), "weight": round(w, 6),
                                "df": index.term_df(t, view)} for t, w in weights.items()],
               "results": results}
        if exp is not None:
            out["expansion"] = {"source": exp.source, "kept": [{"term": t, "df": d} for t, d in exp.kept],
                                "dropped": [{"term": t, "reason": r} for t, r in exp.dropped], "note": exp.note}
        out["took_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return out

"""LLM vocabulary enrichment (SIRA sec. 3.2, SAGE sec. 5.1), the DF filter, and RM3.

Corpus side (offline): per document the LLM proposes absent search vocabulary; the DF filter
drops proposals whose DF exceeds `max_df` (a fraction of the corpus); survivors are injected
as weighted n-gram postings (Index.set_field). SAGE variant: eight LLM keywords plus the
document's metadata values, added as prepended bag-of-words postings.

Query side (online): the LLM predicts evidence vocabulary the query lacks; the DF filter keeps
terms with 1 <= df <= max_df * N in the enriched index; one weighted BM25 call scores
BM25(q) + lambda * BM25(expansion). RM3 fills the same slot without an LLM.

LLM jobs are cached per (kind, model, prompt version, mode, content hash) in diskcache; each
worker writes its own result the moment it arrives, so a killed job loses at most the
requests in flight (none when stopped by an exception) and a re-run repeats nothing cached.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from kb.analysis import ngram_token
from kb.index import Index
from kb.llm import (KEYWORDS_SCHEMA, LLM, MODES, TERMS_SCHEMA, LLMError, doc_messages, prompt_version,
                    query_messages, sage_messages)
from infra.breaker import CircuitBreaker

DEFAULT_MAX_DF = 0.05      # corpus fraction; SIRA gives no value, 5% keeps idf >= ~2.9
DEFAULT_LAMBDA = 0.3       # weight of the query-side expansion, BM25(q) + lambda * BM25(e)
DEFAULT_ENRICH_WEIGHT = 1.0
SAGE_KEYWORDS = 8


def open_cache(cache_dir: Path):
    import diskcache

    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    return diskcache.Cache(str(Path(cache_dir) / "kb_llm"))


def cache_key(kind: str, model: str, mode: str, content_hash: str) -> str:
    return "|".join([kind, model, prompt_version(kind), mode, content_hash])


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --------------------------------------------------------------------------- DF filter
@dataclass
class DFResult:
    kept: list[tuple[str, int]] = field(default_factory=list)      # (term, df)
    dropped: list[tuple[str, str]] = field(default_factory=list)   # (term, reason)


def df_filter(index: Index, candidates: Iterable[str], max_df: float = DEFAULT_MAX_DF, min_df: int = 0,
              view: str = "text", exclude_terms: Iterable[str] = ()) -> DFResult:
    """Keep candidates with min_df <= df <= max_df * N (SIRA's DF filter).

    Corpus side uses min_df=0 over the text view (enrichment brings new vocabulary); query side
    uses min_df=1 over the enriched view (a term must exist to affect BM25). Candidates that
    analyse to nothing, repeat an earlier candidate, or consist only of `exclude_terms`
    (e.g. the query's own terms) are dropped too.
    """
    bound = max_df * max(index.n_docs, 1)
    excluded = set(exclude_terms)
    seen: set[tuple[str, ...]] = set()
    out = DFResult()
    for cand in candidates:
        cand = (cand or "").strip()
        parts = tuple(index.analyze(cand))
        if not parts:
            out.dropped.append((cand, "no terms"))
            continue
        if parts in seen:
            out.dropped.append((cand, "duplicate"))
            continue
        seen.add(parts)
        if set(parts) <= excluded:
            out.dropped.append((cand, "already in query"))
            continue
        df = index.df(cand, view)
        if df < min_df:
            out.dropped.append((cand, f"df {df} < {min_df}"))
        elif df > bound:
            out.dropped.append((cand, f"df {df} > {bound:g}"))
        else:
            out.kept.append((cand, df))
    return out


# --------------------------------------------------------------------------- LLM jobs
@dataclass
class JobItem:
    id: str
    key: str
    messages: list[dict]


@dataclass
class JobReport:
    total: int = 0
    cached: int = 0
    requested: int = 0
    succeeded: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["failures"] = dict(list(self.failures.items())[:50])
        return d


def run_llm_job(items: Sequence[JobItem], llm: LLM, cache, schema: dict, name: str = "terms",
                concurrency: int = 4, progress: bool = True,
                on_result: Callable[[str, bool], None] | None = None) -> JobReport:
    """Run uncached requests on a thread pool; each result is cached by its worker as it lands.

    A failure (HTTP error, timeout, invalid JSON) is recorded in the report and not cached, so
    the next run retries it; the job itself never raises for one bad document. If the caller's
    `on_result` raises (or the process is interrupted) queued requests are cancelled and those
    in flight still complete and are cached before the exception propagates.
    """
    from tqdm import tqdm

    rep = JobReport(total=len(items))
    todo = [it for it in items if it.key not in cache]
    rep.cached = rep.total - len(todo)
    lock = threading.Lock()
    started = time.perf_counter()

    def work(it: JobItem):
        try:
            reply = llm.complete_json(it.messages, schema, name)
        except Exception as exc:  # noqa: BLE001 - one document must never crash the job
            return it, None, f"{type(exc).__name__}: {exc}"[:300]
        cache.set(it.key, {"data": reply.data, "prompt_tokens": reply.prompt_tokens,
                           "completion_tokens": reply.completion_tokens, "at": time.time()})
        with lock:
            rep.prompt_tokens += reply.prompt_tokens
            rep.completion_tokens += reply.completion_tokens
        return it, reply, None

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    bar = tqdm(total=len(todo), desc=f"LLM {name}", unit="req", disable=not progress, leave=False)
    try:
        futures = [pool.submit(work, it) for it in todo]
        for fut in as_completed(futures):
            it, reply, err = fut.result()
            rep.requested += 1
            if err is None:
                rep.succeeded += 1
            else:
                rep.failed += 1
                rep.failures[it.id] = err
            bar.update(1)
            if on_result is not None:
                on_result(it.id, err is None)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
        rep.seconds = round(time.perf_counter() - started, 3)
    return rep


def cached_data(cache, key: str) -> dict | None:
    hit = cache.get(key)
    return hit["data"] if hit else None


# --------------------------------------------------------------------------- corpus side
def doc_job_items(docs, kind: str, model: str, mode: str) -> list[JobItem]:
    items = []
    for d in docs:
        key = cache_key(kind, model, mode, d.hash)
        msgs = sage_messages(d.content) if kind == "sage" else doc_messages(mode, d.content)
        items.append(JobItem(d.id, key, msgs))
    return items


def bound_enriched_df(index: Index, proposals: dict[str, list[tuple[str, float]]],
                      max_df: float) -> tuple[dict[str, list[tuple[str, float]]], int]:
    """The DF bound again, on the enriched view: a term's document frequency counts the documents
    whose text has it plus those it is about to be injected into. A term the LLM proposes for
    many documents says nothing about any one of them (a weak model proposing the same phrase
    everywhere would otherwise flood the index), so above max_df * N it is dropped everywhere.
    Returns the surviving proposals and how many (doc, term) pairs were dropped."""
    key = {term: tuple(index.analyze(term)) for terms in proposals.values() for term, _ in terms}
    proposed_in: dict[tuple, int] = {}
    for terms in proposals.values():
        for parts in {key[term] for term, _ in terms}:
            proposed_in[parts] = proposed_in.get(parts, 0) + 1
    bound = max(max_df * max(index.n_docs, 1), 1.0)
    too_common = {parts for parts, n in proposed_in.items() if n + index.df(" ".join(parts), "text") > bound}
    kept = {doc: [(t, w) for t, w in terms if key[t] not in too_common] for doc, terms in proposals.items()}
    dropped = sum(len(terms) - len(kept[doc]) for doc, terms in proposals.items())
    return {doc: terms for doc, terms in kept.items() if terms}, dropped


def build_postings(index: Index, docs, cache, kind: str, model: str, mode: str,
                   max_df: float = DEFAULT_MAX_DF, weight: float = DEFAULT_ENRICH_WEIGHT) -> tuple[dict, dict]:
    """{doc_id: [(phrase, weight)]} from cached LLM output, through the DF filter."""
    postings: dict[str, list[tuple[str, float]]] = {}
    stats = {"docs_with_output": 0, "proposed": 0, "kept": 0, "dropped": 0}
    for d in docs:
        data = cached_data(cache, cache_key(kind, model, mode, d.hash))
        if data is None:
            continue
        stats["docs_with_output"] += 1
        if kind == "sage":
            kws = [k for k in data.get("keywords", []) if isinstance(k, str)][:SAGE_KEYWORDS]
            meta = [str(v) for v in (d.metadata or {}).values() if isinstance(v, (str, int, float)) and str(v)]
            stats["proposed"] += len(kws)
            stats["kept"] += len(kws)
            postings[d.id] = [(t, weight) for t in meta + kws]
            continue
        proposals = [t for t in data.get("terms", []) if isinstance(t, str)]
        res = df_filter(index, proposals, max_df=max_df, min_df=0, view="text")
        stats["proposed"] += len(proposals)
        stats["kept"] += len(res.kept)
        stats["dropped"] += len(res.dropped)
        if res.kept:
            postings[d.id] = [(t, weight) for t, _ in res.kept]
    if kind != "sage":
        postings, overproposed = bound_enriched_df(index, postings, max_df)
        stats["kept"] -= overproposed
        stats["dropped"] += overproposed
    return postings, stats


def enrich_corpus(store, name: str, llm: LLM | None, cache, model: str, mode: str = "fact_checking",
                  variant: str = "sira", limit: int | None = None, concurrency: int = 4,
                  max_df: float = DEFAULT_MAX_DF, weight: float = DEFAULT_ENRICH_WEIGHT, ngram_max: int = 3,
                  progress: bool = True, on_result=None) -> dict:
    """Run (or resume) the LLM job over the corpus, then rebuild the injected field from cache.

    `llm=None` skips requests and only applies what is cached. Failures are written to
    corpora/NAME/enrich_failures.<variant>.json and retried on the next run.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if variant not in ("sira", "sage"):
        raise ValueError("variant must be 'sira' or 'sage'")
    kind, field_name = ("sage", "sage") if variant == "sage" else ("doc", "enrich")
    docs = store.documents(name)
    index = store.load_index(name)
    subset = docs[:limit] if limit else docs
    rep = JobReport(total=len(subset))
    if llm is not None:
        rep = run_llm_job(doc_job_items(subset, kind, model, mode), llm, cache,
                          KEYWORDS_SCHEMA if kind == "sage" else TERMS_SCHEMA,
                          name="keywords" if kind == "sage" else "terms",
                          concurrency=concurrency, progress=progress, on_result=on_result)
    fail_path = store.path(name) / f"enrich_failures.{variant}.json"
    fail_path.write_text(json.dumps(rep.failures, indent=1), encoding="utf-8")
    postings, pstats = build_postings(index, docs, cache, kind, model, mode, max_df, weight)
    meta = {"model": model, "mode": mode, "variant": variant, "max_df": max_df, "weight": weight,
            "prompt_version": prompt_version(kind)}
    if variant == "sage":
        injected = index.set_field(field_name, postings, ngram_max=1, meta=meta, skip_present=False, combine="sum")
    else:
        injected = index.set_field(field_name, postings, ngram_max=ngram_max, meta=meta)
    index.save(store.index_path(name))
    return {"job": rep.as_dict(), "filter": pstats, "injected": injected}


# --------------------------------------------------------------------------- query side
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


def llm_expansion(index: Index, query: str, llm: LLM | None, cache, model: str, mode: str = "fact_checking",
                  view: str = "enriched", max_df: float = DEFAULT_MAX_DF, lam: float = DEFAULT_LAMBDA,
                  breaker: CircuitBreaker | None = None) -> Expansion:
    """The LLM's expansion of `query` (cached), or none with a note when the LLM is absent or
    fails. Expansion runs on the search path, so `breaker` (the re-ranker's kind) stops calling
    an endpoint that keeps failing: during its cooldown a query costs no timeout at all. As for
    the re-ranker, only transport failures count; an answer that arrived unusable (LLMError)
    proves the endpoint is up."""
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


# --------------------------------------------------------------------------- task catalog
def task_text(rec) -> str:
    parts = [rec.name, rec.help or "", rec.category or "", " ".join(rec.aliases or ())]
    return "\n".join(p for p in parts if p)


def enrich_tasks(records: Sequence, llm: LLM | None, cache, model: str, max_df: float = 0.1,
                 concurrency: int = 4, progress: bool = False, weight: float = 1.0) -> dict[str, list[tuple[str, float]]]:
    """Per-task enrichment terms {task_id: [(term_or_phrase, weight), ...]} for the prefilter.

    task_catalog prompt mode; cached per (task content hash, model, prompt version) like
    documents; DF filter over the catalog itself (an index of name + help + category + aliases).
    Tasks without a cached or fresh LLM answer get an empty list.
    """
    from kb.index import DocInput

    index = Index()
    hashes = {r.id: text_hash(task_text(r)) for r in records}
    index.update([DocInput(r.id, hashes[r.id], task_text(r)) for r in records])
    items = [JobItem(r.id, cache_key("doc", model, "task_catalog", hashes[r.id]),
                     doc_messages("task_catalog", task_text(r))) for r in records]
    if llm is not None:
        run_llm_job(items, llm, cache, TERMS_SCHEMA, "terms", concurrency=concurrency, progress=progress)
    out: dict[str, list[tuple[str, float]]] = {}
    for r, it in zip(records, items):
        data = cached_data(cache, it.key)
        proposals = [t for t in (data or {}).get("terms", []) if isinstance(t, str)]
        own = set(index.analyze(task_text(r)))
        res = df_filter(index, proposals, max_df=max_df, min_df=0, view="text", exclude_terms=own)
        out[r.id] = [(t, weight) for t, _ in res.kept]
    kept, _ = bound_enriched_df(index, out, max_df)
    return {r.id: kept.get(r.id, []) for r in records}


def catalog_enrichment(settings):
    """With CATALOG_ENRICHMENT=1, a function tasks -> enrichment that reads the task vocabulary
    cached by `corpus enrich-catalog` for the configured LLM model (no LLM call at search time),
    for the search index's `enriched` field; None when the setting is off."""
    if not settings.catalog_enrichment:
        return None
    cache = open_cache(settings.cache_dir)
    return lambda tasks: enrich_tasks(tasks, None, cache, settings.llm_model)

"""LLM vocabulary enrichment of a corpus or of the task catalog (offline; SIRA sec. 3.2, SAGE
sec. 5.1).

Per document the LLM proposes absent search vocabulary (a cached job, kb.jobs); the DF filter
(kb.df) drops proposals whose DF exceeds `max_df` (a fraction of the corpus); survivors are
injected as weighted n-gram postings (Index.set_field). SAGE variant: eight LLM keywords plus
the document's metadata values, added as prepended bag-of-words postings. The query side is
kb.expansion.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from kb.df import DEFAULT_MAX_DF, bound_enriched_df, df_filter
from kb.index import Index
from kb.jobs import JobItem, JobOptions, JobReport, cache_key, cached_data, open_cache, run_llm_job, text_hash
from kb.llm import KEYWORDS_SCHEMA, LLM, MODES, TERMS_SCHEMA, doc_messages, prompt_version, sage_messages

DEFAULT_ENRICH_WEIGHT = 1.0
SAGE_KEYWORDS = 8


@dataclass(frozen=True)
class EnrichOptions:
    """What a corpus enrichment asks the LLM for and injects: the prompt `mode` (kb.llm.MODES),
    the `variant` ("sira": the proposed terms through the DF filter, as n-gram postings of the
    `enrich` field; "sage": SAGE_KEYWORDS keywords plus the document's metadata values, as
    bag-of-words postings of the `sage` field), the first `limit` documents only (None: all), the
    DF bound `max_df` (a fraction of the corpus), the postings' `weight` and the longest n-gram a
    SIRA phrase is injected as (`ngram_max`)."""

    mode: str = "fact_checking"
    variant: str = "sira"
    limit: int | None = None
    max_df: float = DEFAULT_MAX_DF
    weight: float = DEFAULT_ENRICH_WEIGHT
    ngram_max: int = 3

    @property
    def kind(self) -> str:
        """The LLM job's kind in the cache key (kb.jobs.cache_key): "sage", or "doc" for SIRA."""
        return "sage" if self.variant == "sage" else "doc"


def doc_job_items(docs, kind: str, model: str, mode: str) -> list[JobItem]:
    items = []
    for d in docs:
        key = cache_key(kind, model, mode, d.hash)
        msgs = sage_messages(d.content) if kind == "sage" else doc_messages(mode, d.content)
        items.append(JobItem(d.id, key, msgs))
    return items


def build_postings(index: Index, docs, cache, model: str, options: EnrichOptions) -> tuple[dict, dict]:
    """{doc_id: [(phrase, weight)]} from cached LLM output (`model`'s answers to the options'
    variant and mode), through the DF filter."""
    kind, mode, max_df, weight = options.kind, options.mode, options.max_df, options.weight
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


def enrich_corpus(store, name: str, llm: LLM | None, cache, model: str, options: EnrichOptions = EnrichOptions(),
                  job: JobOptions = JobOptions()) -> dict:
    """Run (or resume) the LLM job over the corpus (`job`: its pool, progress bar and callback),
    then rebuild the injected field from cache (`options`: what is asked and injected).

    `llm=None` skips requests and only applies what is cached. Failures are written to
    corpora/NAME/enrich_failures.<variant>.json and retried on the next run.
    """
    mode, variant = options.mode, options.variant
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if variant not in ("sira", "sage"):
        raise ValueError("variant must be 'sira' or 'sage'")
    kind, field_name = options.kind, ("sage" if variant == "sage" else "enrich")
    docs = store.documents(name)
    index = store.load_index(name)
    subset = docs[:options.limit] if options.limit else docs
    rep = JobReport(total=len(subset))
    if llm is not None:
        rep = run_llm_job(doc_job_items(subset, kind, model, mode), llm, cache,
                          KEYWORDS_SCHEMA if kind == "sage" else TERMS_SCHEMA,
                          name="keywords" if kind == "sage" else "terms", options=job)
    fail_path = store.path(name) / f"enrich_failures.{variant}.json"
    fail_path.write_text(json.dumps(rep.failures, indent=1), encoding="utf-8")
    postings, pstats = build_postings(index, docs, cache, model, options)
    meta = {"model": model, "mode": mode, "variant": variant, "max_df": options.max_df, "weight": options.weight,
            "prompt_version": prompt_version(kind)}
    if variant == "sage":
        injected = index.set_field(field_name, postings, ngram_max=1, meta=meta, skip_present=False, combine="sum")
    else:
        injected = index.set_field(field_name, postings, ngram_max=options.ngram_max, meta=meta)
    index.save(store.index_path(name))
    return {"job": rep.as_dict(), "filter": pstats, "injected": injected}


# --------------------------------------------------------------------------- task catalog
def task_text(rec) -> str:
    parts = [rec.name, rec.help or "", rec.category or "", " ".join(rec.aliases or ())]
    return "\n".join(p for p in parts if p)


def enrich_tasks(records: Sequence, llm: LLM | None, cache, model: str, max_df: float = 0.1, weight: float = 1.0,
                 job: JobOptions = JobOptions(progress=False)) -> dict[str, list[tuple[str, float]]]:
    """Per-task enrichment terms {task_id: [(term_or_phrase, weight), ...]} for the prefilter
    (`job`: the LLM job's pool and progress bar).

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
        run_llm_job(items, llm, cache, TERMS_SCHEMA, "terms", job)
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

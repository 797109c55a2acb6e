"""Deterministic configurations, replayed over the held-out queries' signal values.

The held-out queries are analysed and scored ONCE against an index built from the training cases
(with the fit's prototypes), exactly as the live service scores them (`heldout_queries` is
checked against `prefilter` in the tests); each configuration then only re-fuses those values
with its own weights (search.prefilter.rank_values), so a dozen configurations cost little
more than one.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from lexicon.text import terms
from search.confidence import assess
from search.fitting import CVQuery, attach_vectors, fit_weights
from search.index import SearchIndex, build_index
from search.learned import build_learned_memory
from search.prefilter import analyse_query, rank_values, signal_values
from search.ranker import FusionWeights, RankerParams
from settings import Settings

from .configs import ConfigSpec
from .runner import ConfigRun, QueryRun, progress


def heldout_index(settings: Settings, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord], embedder,
                  params: RankerParams) -> SearchIndex:
    """The index the product would serve after importing `train`: lexicon, exemplars, vectors and
    the fit's prototypes, and the learned exemplars the fit weighed (params.learned)."""
    index = build_index(tasks, build_lexicon(train), settings.field_weights, cases=train)
    if params.learned:
        index = index.with_learned(build_learned_memory([t.id for t in index.tasks], params.learned))
    if embedder is None:
        return index
    index = attach_vectors(index, embedder)
    return index.with_prototypes(params.prototype_matrix(index))


def heldout_queries(settings: Settings, index: SearchIndex, test: Sequence[CaseRecord], embedder,
                    show: bool = False, typing: bool | None = False) -> tuple[list[CVQuery], list[float]]:
    """Each test case's signal values over every active task, and the time that took (ms).
    `typing`: as /api/search's parameter; False (the default): the test queries are whole ones,
    submitted (the widget's Enter, a host that says so); None: as a bare API request reads them;
    evaluation.prefixes ranks its cuts so."""
    analysed = [analyse_query(index, c.query, settings.typo_min_similarity, typing=typing) for c in test]
    vectors: list = [None] * len(test)
    if embedder is not None and index.has_vectors and analysed:
        vectors = list(embedder.embed([a.embedding_text for a in analysed], "query"))
    rows, visible = index.visible(None, restrict=False)
    out, millis = [], []
    for case, query, vector in progress(list(zip(test, analysed, vectors)), "held-out signals", show):
        started = time.perf_counter()
        values = signal_values(index, query, rows, vector)
        oos = index.exemplars.nearest_out_of_scope(vector) if vector is not None else None
        pinned = tuple(t for t in index.lexicon.pinned_for(case.query) if any(v.id == t for v in visible))
        millis.append((time.perf_counter() - started) * 1000.0)
        out.append(CVQuery(case, -1, visible, values, oos, pinned, unfinished=query.unfinished))
    return out, millis


def spec_weights(spec: ConfigSpec, params: RankerParams, cv: Sequence[CVQuery]):
    """The weights a deterministic configuration ranks with."""
    if spec.kind == "fixed":
        return FusionWeights(spec.weights, spec.weights)
    if spec.kind == "fitted":
        prior = params.weights
        return FusionWeights(fit_weights(cv, "full", prior.full, signals=spec.signals),
                             fit_weights(cv, "sparse", prior.sparse, signals=spec.signals))
    return params.weights


def run_replay(spec: ConfigSpec, params: RankerParams, cv: Sequence[CVQuery], queries: Sequence[CVQuery],
               millis: Sequence[float], depth: int) -> ConfigRun:
    """Rank every held-out query with `spec`; the product's configurations also record whether
    the fitted abstention answers (row.extra['answered'])."""
    weights = spec_weights(spec, params, cv)
    run = ConfigRun(spec)
    for query, ms in zip(queries, millis):
        values = query.values_for(spec.mode)
        started = time.perf_counter()
        typing = spec.kind == "product" and query.unfinished   # the product ranks a typed prefix as typed
        result = rank_values(query.tasks, values, params.weights_for(True) if typing else weights, depth,
                             query.pinned if spec.pins else (), query.out_of_scope_similarity)
        latency = ms + (time.perf_counter() - started) * 1000.0
        extra = {"pinned": bool(result.ranked and result.ranked[0].pinned)}
        if spec.kind == "product":
            confidence = assess(result, params.abstention_for(result.mode), query.unfinished)
            extra["answered"], extra["logit"] = confidence.answer, confidence.logit
        run.rows.append(QueryRun(query.case.query, query.case.gold, query.case.category,
                                 [item.task.id for item in result.ranked], [item.score for item in result.ranked],
                                 latency, extra=extra))
    if spec.kind == "fitted":
        run.notes["weights"] = weights.as_dict()
    return run


def run_bm25(spec: ConfigSpec, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord],
             test: Sequence[CaseRecord], depth: int) -> ConfigRun:
    """The plain baseline: one BM25 document per task (name + help + its training case queries),
    bm25s with its default (Lucene) parameters over the product's own stemmed terms."""
    import bm25s

    tasks = [t for t in tasks if t.active]
    text = {t.id: [t.name, t.help] for t in tasks}
    for case in train:
        for task_id in case.gold:
            if task_id in text:
                text[task_id].append(case.query)
    corpus = [terms(" ".join(text[t.id])) or ["\x00empty"] for t in tasks]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    run = ConfigRun(spec)
    k = min(depth, len(tasks))
    for case in test:
        started = time.perf_counter()
        tokens = terms(case.query)
        ranking: list[str] = []
        scores: list[float] = []
        if tokens:
            docs, values = retriever.retrieve([tokens], k=k, show_progress=False)
            ranking = [tasks[int(d)].id for d, v in zip(docs[0], values[0]) if v > 0]
            scores = [float(v) for v in values[0] if v > 0]
        run.rows.append(QueryRun(case.query, case.gold, case.category, ranking, scores,
                                 (time.perf_counter() - started) * 1000.0))
    return run


def abstention_point(run: ConfigRun) -> dict | None:
    """Held-out operating point of the fitted abstention: in-scope Hit@5 counted only when
    answered, share of out-of-scope queries answered, share of in-scope queries refused."""
    rows = [r for r in run.rows if "answered" in r.extra]
    if not rows:
        return None
    ins = [r for r in rows if r.gold]
    oos = [r for r in rows if not r.gold]
    hit = [r.extra["answered"] and bool(set(r.gold) & set(r.ranking[:5])) for r in ins]
    return {"hit@5": float(np.mean(hit)) if ins else None,
            "oos_fpr": float(np.mean([r.extra["answered"] for r in oos])) if oos else None,
            "in_scope_abstain": float(np.mean([not r.extra["answered"] for r in ins])) if ins else None,
            "oracle_oos_fpr_at_2pts": oracle_fpr(ins, oos)}


def oracle_fpr(ins, oos, max_hit_loss: float = 0.02) -> float | None:
    """DIAGNOSTIC ONLY: the lowest out-of-scope FPR any threshold on the abstention logit reaches
    while held-out Hit@5 stays within `max_hit_loss` of answering everything, the threshold being
    chosen on the held-out split itself. It says how good the separator is, not what the product
    does (the product's threshold is fixed on the training split's CV)."""
    rows = [*ins, *oos]
    if not ins or not oos or any(r.extra.get("logit") is None and not r.extra.get("pinned") for r in rows):
        return None
    hit = {id(r): bool(set(r.gold) & set(r.ranking[:5])) for r in ins}
    base = float(np.mean(list(hit.values())))
    best = None
    for t in sorted({r.extra["logit"] for r in rows if r.extra.get("logit") is not None}) + [float("inf")]:
        answered = lambda r: r.extra.get("pinned") or (r.extra.get("logit") is not None and r.extra["logit"] >= t)  # noqa: E731
        if np.mean([answered(r) and hit[id(r)] for r in ins]) >= base - max_hit_loss - 1e-12:
            fpr = float(np.mean([answered(r) for r in oos]))
            best = fpr if best is None else min(best, fpr)
    return best

"""Deterministic configurations, replayed over the held-out queries' signal values.

The held-out queries are analysed and scored ONCE (search.pipeline.Pipeline.score) against the
index the fit would serve after importing the training cases (search.assembly.serving_index,
with the fit's prototypes), as the live service scores them; each configuration then only
re-fuses those values with its own weights (Pipeline.fuse), so a dozen configurations cost
little more than one. The product's configuration fuses with the fit's own weights, abstention
and tail cut: the same pipeline the service answers with (tests/test_evaluation_run.py checks
the replay against the prefilter's stages).

A held-out case is a query a person submitted (search.request.SearchRequest.of_case), as it is
in the fit's cross-validation and the admin's preview; the prefix evaluation's cuts are typed
texts (SearchRequest.typed).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from lexicon.text import terms
from search.assembly import IndexOptions, attach, serving_index
from search.fitting import CVQuery, fit_weights
from search.index import SearchIndex
from search.pipeline import Pipeline, make_pipeline
from search.prefilter import Scored
from search.ranker import FusionWeights, RankerParams
from search.request import EVERYONE, SearchRequest
from settings import Settings

from .configs import ConfigSpec
from .runner import ConfigRun, QueryRun, progress


def heldout_index(settings: Settings, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord], embedder,
                  params: RankerParams) -> SearchIndex:
    """The index the product would serve after importing `train`, ranked by `params`
    (search.assembly.serving_index and attach: lexicon, exemplars, the learned evidence the fit
    weighed, vectors and the fit's prototypes)."""
    index = serving_index(settings, tasks, train, params, IndexOptions(written=False))
    return index if embedder is None else attach(index, params, embedder)


def replay_pipeline(settings: Settings, index: SearchIndex, params: RankerParams, embedder) -> Pipeline:
    """The pipeline an evaluation ranks with (search.pipeline.make_pipeline): `index` and the fit
    `params`, abstaining whatever settings.abstain says (the evaluation measures the fit's
    abstention, whether the server applies it or not)."""
    return make_pipeline(index, params, settings, embedder, abstain=True)


@dataclass(frozen=True)
class HeldOutQuery:
    """One held-out case and its signal values over every active task (Pipeline.score)."""

    case: CaseRecord
    scored: Scored

    @property
    def tasks(self):
        return self.scored.tasks

    @property
    def values(self):
        return self.scored.values

    @property
    def pinned(self) -> tuple[str, ...]:
        return self.scored.pinned

    @property
    def unfinished(self) -> int:
        return self.scored.analysed.unfinished

    def for_mode(self, mode: str, pins: bool = True) -> Scored:
        """Its values as the configuration of `mode` sees them, with or without the pins."""
        scored = self.scored.for_mode(mode)
        return scored if pins else replace(scored, pinned=())


def heldout_queries(pipeline: Pipeline, test: Sequence[CaseRecord], show: bool = False,
                    typed: bool = False, typing: bool | None = None,
                    language: str | None = None) -> tuple[list[HeldOutQuery], list[float]]:
    """Each test case's signal values over every active task (the evaluation's viewer), with
    the pins of its exact query, and the time that took (ms). Each is a test case, submitted
    (SearchRequest.of_case); `typed`: texts as sent with the API's `typing` (SearchRequest.typed:
    True, as the widget sends a keystroke; None, the prefilter's reading; a trailing space
    finishes the last word), as evaluation.prefixes ranks its cuts and keystrokes; `language`, the
    page's language they are typed on (the API's `lang`: lexicon.language.page_language)."""
    requests = [SearchRequest.typed(c.query, EVERYONE, typing=typing, language=language) if typed
                else SearchRequest.of_case(c.query, EVERYONE) for c in test]
    analysed = [pipeline.analyse(request) for request in requests]
    vectors = pipeline.embed(analysed)
    out, millis = [], []
    for case, request, query, vector in progress(list(zip(test, requests, analysed, vectors)), "held-out signals",
                                                 show):
        started = time.perf_counter()
        scored = pipeline.score(request, query, vector)
        millis.append((time.perf_counter() - started) * 1000.0)
        out.append(HeldOutQuery(case, scored))
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


def run_replay(spec: ConfigSpec, pipeline: Pipeline, cv, queries: Sequence[HeldOutQuery],
               millis: Sequence[float], depth: int) -> ConfigRun:
    """Rank every held-out query with `spec` through the pipeline (Pipeline.fuse: replay_pipeline's,
    the fit's); the product's configuration ranks with the fit's own weights (its typing weights
    for a query still being typed) and records whether the fitted abstention answers
    (row.extra['answered'])."""
    weights = spec_weights(spec, pipeline.params, cv)
    run = ConfigRun(spec)
    for query, ms in zip(queries, millis):
        started = time.perf_counter()
        ranked = pipeline.fuse(query.for_mode(spec.mode, spec.pins), depth,
                               None if spec.kind == "product" else weights)
        result = ranked.result
        latency = ms + (time.perf_counter() - started) * 1000.0
        extra = {"pinned": bool(result.ranked and result.ranked[0].pinned)}
        if spec.kind == "product":
            extra["answered"], extra["logit"] = ranked.answered, ranked.confidence.logit
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

    # bm25s sets its logger to DEBUG on import: under a console that logging is configured for
    # (waitress's `serve` calls logging.basicConfig()), every evaluation run printed
    # "DEBUG:bm25s:Building index from tokens" (issue 44 item 10)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
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

"""How the shipped default weights (settings.Weights, settings.DegradedWeights) were chosen.

A catalog with too few test cases for its own fit ranks with these defaults, so they must be
robust across catalogs rather than win on one. They are one conditional-logit fit
(search.fitting.conditional_logit) on a POOL of cross-validated queries from several catalogs,
each contributing the same number of queries so that no catalog dominates:

    demo        the Head Start demo's training cases, 5-fold CV (the lexicon and exemplars of
                each fold come from the other folds)
    demo-cold   the same queries against the demo catalog with NO test cases (names, aliases, help)
    clinc-few   CLINC150 with 5 random training requests per intent, 5-fold CV
    clinc-cold  CLINC150 training requests against the intent names alone

No prototype weight is fitted (prototypes exist only with a per-catalog fit). Run:

    python -m evaluation.defaults ../shared/data/clinc150 [--per-catalog 400]

and copy the printed weights into settings.py. Held-out splits (the demo's 20% hash split,
CLINC150 val) never enter.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields
from pathlib import Path

import diskcache

from catalog.demo import DEMO_CASES, DEMO_CATALOG
from catalog.formats import load_cases_file, load_tasks_file
from catalog.splits import bucket, holdout_split
from search.embeddings import build_embedder
from search.assembly import attach_vectors, build
from search.fitting import CVQuery, FitContext, cv_queries, design_matrices, fit_standardised, ranked_ids, ranking_metrics
from search.pipeline import make_pipeline
from search.prefilter import SPARSE_SIGNALS
from search.signal import REGISTRY
from search.ranker import FusionWeights, default_params
from search.request import EVERYONE, SearchRequest
from settings import Settings, Weights

# The signals with a shipped default weight (not Signal.fit_only) of each mode (search/signal/).
POOL_SIGNALS = {"full": tuple(s.name for s in REGISTRY if s.family in ("sparse", "dense") and not s.fit_only),
                "sparse": SPARSE_SIGNALS}


def cold_queries(settings: Settings, tasks, cases, embedder) -> list[CVQuery]:
    """`cases` scored against an index of the catalog alone (no test case at all), each the
    query a person submitted (search.request.SearchRequest.of_case), every task visible, no
    pins (there are no cases to pin)."""
    pipeline = make_pipeline(attach_vectors(build(settings, tasks, []), embedder), default_params(settings), settings,
                             embedder)
    requests = [SearchRequest.of_case(c.query, EVERYONE, pins=False) for c in cases]
    analysed = [pipeline.analyse(request) for request in requests]
    out = []
    for case, request, query, vector in zip(cases, requests, analysed, pipeline.embed(analysed)):
        scored = pipeline.score(request, query, vector)
        out.append(CVQuery(case, 0, scored.tasks, scored.values, None))
    return out


def pooled(settings: Settings, embedder, clinc_dir: Path, per_catalog: int) -> dict[str, list[CVQuery]]:
    from evaluation import clinc150

    demo_tasks = load_tasks_file(DEMO_CATALOG)
    demo_train, _ = holdout_split(load_cases_file(DEMO_CASES, {t.id for t in demo_tasks}), 0.2, 42)
    few = clinc150.load(clinc_dir, max_per_intent=5, sample_seed=0)
    full = clinc150.load(clinc_dir)
    sample = sorted([c for c in full.train if c.gold], key=lambda c: bucket(7, c.query))[:per_catalog]
    pools = {
        "demo": cv_queries(FitContext(settings, demo_tasks, demo_train, embedder)),
        "demo-cold": cold_queries(settings, demo_tasks, [c for c in demo_train if c.gold], embedder),
        "clinc-few": cv_queries(FitContext(settings, few.tasks, few.train, embedder)),
        "clinc-cold": cold_queries(settings, full.tasks, sample, embedder),
    }
    return {name: sorted([q for q in qs if q.case.gold], key=lambda q: bucket(11, q.case.query))[:per_catalog]
            for name, qs in pools.items()}


def fit_pooled(pools: dict[str, list[CVQuery]], mode: str) -> Weights:
    names = list(POOL_SIGNALS[mode])
    zero = Weights(**{f.name: 0.0 for f in fields(Weights)})
    matrices, golds = [], []
    for queries in pools.values():
        m, g = design_matrices(queries, names, Weights(**{**asdict(zero), "lexical": 1.0, "embedding": 1.0}))
        matrices += m
        golds += g
    return fit_standardised(matrices, golds, names, zero, 1.0, digits=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.defaults")
    parser.add_argument("clinc_dir", type=Path)
    parser.add_argument("--per-catalog", type=int, default=400)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    settings.cache_dir.mkdir(parents=True, exist_ok=True)
    embedder = build_embedder(settings, diskcache.Cache(str(settings.cache_dir)))
    pools = pooled(settings, embedder, args.clinc_dir, args.per_catalog)
    weights = FusionWeights(fit_pooled(pools, "full"), fit_pooled(pools, "sparse"))
    report = {"weights": weights.as_dict(), "per_catalog": {}}
    for name, queries in pools.items():
        report["per_catalog"][name] = {
            mode: {"current": ranking_metrics(queries, ranked_ids(queries, FusionWeights(settings.weights,
                                                                                       settings.degraded_weights), mode)),
                   "pooled": ranking_metrics(queries, ranked_ids(queries, weights, mode))}
            for mode in ("full", "sparse")}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

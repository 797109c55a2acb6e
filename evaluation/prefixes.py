"""Type-ahead quality: Hit@5 of the product's ranking on PREFIXES of the held-out queries.

    python app.py evaluate-prefixes --catalog catalog/data/headstart_catalog.jsonl \
        --cases catalog/data/headstart_cases.jsonl            # the demo, hash holdout 0.2 seed 42
    python app.py evaluate-prefixes --clinc150 ../shared/data/clinc150   # CLINC150 train -> val

What a person has typed after n characters is the held-out query cut at n (`query[:n]`, the
whole query when it is shorter); each cut is ranked exactly as /api/search ranks it (the
product's own fit on the training split only, its index, its signals, `rank_values`, pins), in
both modes: embeddings on ("full") and off ("sparse", the degraded mode). In-scope held-out
cases only (a prefix of an out-of-scope query has no gold). Results: docs/prefix-search.md.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from evaluation.evaluate import fit_on_training
from evaluation.metrics import hit_at, reciprocal_rank
from evaluation.replay import heldout_index, heldout_queries
from search.prefilter import rank_values

CUTS = (3, 5, 8)
DEPTH = 10


def prefix_cases(test, cut: int | None):
    """The in-scope held-out cases with their query cut after `cut` characters (None: whole)."""
    return [replace(case, query=case.query[:cut] if cut else case.query) for case in test
            if case.gold and (case.query[:cut] if cut else case.query).strip()]


def score(queries, params, mode: str) -> dict:
    hits, reciprocal = [], []
    for query in queries:
        result = rank_values(query.tasks, query.values_for(mode), params.weights, DEPTH, query.pinned,
                             query.out_of_scope_similarity)
        ranking, gold = [item.task.id for item in result.ranked], set(query.case.gold)
        hits.append(hit_at(ranking, gold, 5))
        reciprocal.append(reciprocal_rank(ranking, gold))
    n = len(hits)
    return {"n": n, "hit@5": round(sum(hits) / n, 4) if n else None, "mrr": round(sum(reciprocal) / n, 4) if n else None}


def run(settings, tasks, train, test, embedder, cuts=CUTS, seed: int = 42, cv_max_queries: int = 3000) -> dict:
    tasks = [t for t in tasks if t.active]
    params, _, _ = fit_on_training(settings, tasks, train, embedder, seed, cv_max_queries, show=False)
    index = heldout_index(settings, tasks, train, embedder, params)
    out = {}
    for cut in (*cuts, None):
        queries, _ = heldout_queries(settings, index, prefix_cases(test, cut), embedder)
        modes = ("full", "sparse") if embedder is not None and index.has_vectors else ("sparse",)
        out[str(cut or "whole")] = {mode: score(queries, params, mode) for mode in modes}
    return out

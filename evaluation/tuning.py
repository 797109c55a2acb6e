"""Weight tuning (a, b, g, d) and shortlist size K by k-fold CV inside the TRAINING split.

Rankings are invariant to scaling all weights, so a (lexical) is fixed at 1.0 and b, g, d are
searched on a grid. The objective is CV MRR (ties: Hit@5, then the weights closest to the
paper's). K only matters to the LLM stage (it sees the top-K shortlist): it is reported as the
CV shortlist recall (Hit@K) of the tuned weights, and the suggested K is the smallest one whose
shortlist recall is within 2 points of Hit@50: a larger K costs prompt tokens and latency.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from settings import Weights

from .configs import PAPER_WEIGHTS
from .metrics import reciprocal_rank

GRID_B = (0.0, 0.4, 0.8, 1.2, 1.6, 2.4)
GRID_G = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
GRID_D = (0.0, 0.15, 0.3, 0.6, 1.0)
K_VALUES = (5, 10, 15, 20, 30, 50)


def evaluate_weights(cv_queries, weights: Weights, depth: int = 20) -> dict:
    rr, hit1, hit5 = [], [], []
    for q in cv_queries:
        gold = set(q.case.gold)
        if not gold:
            continue
        ranking = q.block.rank(weights, depth)
        rr.append(reciprocal_rank(ranking, gold))
        hit1.append(1.0 if ranking[:1] and ranking[0] in gold else 0.0)
        hit5.append(1.0 if gold & set(ranking[:5]) else 0.0)
    n = len(rr)
    return {"n": n, "mrr": float(np.mean(rr)) if n else None, "hit@1": float(np.mean(hit1)) if n else None,
            "hit@5": float(np.mean(hit5)) if n else None}


def shortlist_recall(cv_queries, weights: Weights, ks: Sequence[int] = K_VALUES) -> dict[int, float]:
    hits = {k: [] for k in ks}
    for q in cv_queries:
        gold = set(q.case.gold)
        if not gold:
            continue
        ranking = q.block.rank(weights, max(ks))
        for k in ks:
            hits[k].append(1.0 if gold & set(ranking[:k]) else 0.0)
    return {k: float(np.mean(v)) if v else None for k, v in hits.items()}


def tune(cv_queries, product: Weights, depth: int = 20, show_progress=None) -> dict:
    grid = list(itertools.product(GRID_B, GRID_G, GRID_D))
    results = []
    iterator = show_progress(grid) if show_progress else grid
    for b, g, d in iterator:
        w = Weights(1.0, b, g, d)
        scores = evaluate_weights(cv_queries, w, depth)
        distance = abs(b - PAPER_WEIGHTS.rationale) + abs(g - PAPER_WEIGHTS.embedding) + abs(d - PAPER_WEIGHTS.typo)
        results.append(((scores["mrr"] or 0.0, scores["hit@5"] or 0.0, -distance), w, scores))
    results.sort(key=lambda r: r[0], reverse=True)
    _, best, best_scores = results[0]
    recall = shortlist_recall(cv_queries, best)
    top = recall[max(K_VALUES)] or 0.0
    suggested_k = next((k for k in K_VALUES if (recall[k] or 0.0) >= top - 0.02), max(K_VALUES))

    def row(w: Weights) -> dict:
        return {"weights": {"lexical": w.lexical, "rationale": w.rationale, "embedding": w.embedding, "typo": w.typo},
                **evaluate_weights(cv_queries, w, depth)}

    return {
        "best": row(best),
        "product": row(product),
        "paper": row(PAPER_WEIGHTS),
        "top10": [{"weights": {"lexical": w.lexical, "rationale": w.rationale, "embedding": w.embedding,
                               "typo": w.typo}, **s} for _, w, s in results[:10]],
        "grid": {"rationale": list(GRID_B), "embedding": list(GRID_G), "typo": list(GRID_D), "lexical": [1.0]},
        "shortlist_recall": {str(k): v for k, v in recall.items()},
        "shortlist_recall_product": {str(k): v for k, v in shortlist_recall(cv_queries, product).items()},
        "suggested_k": suggested_k,
        "n_cv_queries": best_scores["n"],
    }

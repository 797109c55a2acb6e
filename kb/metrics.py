"""Retrieval metrics with the standard TREC definitions (as trec_eval / pytrec_eval / BEIR).

nDCG@k: DCG = sum_{i=1..k} gain(d_i) / log2(i + 1) with gain = graded relevance (linear, as
trec_eval's ndcg_cut); IDCG is the DCG of the ideal ordering of *all* judged-relevant docs.
Recall@k = |relevant in top k| / |relevant|; MRR@k = 1 / rank of the first relevant doc in
the top k (0 if none). "Relevant" means relevance > 0. Queries without qrels are skipped.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence


def ndcg_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(qrel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]) if qrel.get(d, 0) > 0)
    ideal = sorted((r for r in qrel.values() if r > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int) -> float:
    rel = {d for d, r in qrel.items() if r > 0}
    if not rel:
        return 0.0
    return len(rel.intersection(ranking[:k])) / len(rel)


def mrr_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranking[:k]):
        if qrel.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def evaluate_run(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict:
    """Mean metrics over queries that have at least one relevant judgement."""
    qids = [q for q in run if any(r > 0 for r in qrels.get(q, {}).values())]
    n = len(qids)
    if n == 0:
        return {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0, "n": 0}
    return {
        "ndcg@10": sum(ndcg_at_k(run[q], qrels[q], 10) for q in qids) / n,
        "recall@10": sum(recall_at_k(run[q], qrels[q], 10) for q in qids) / n,
        "recall@100": sum(recall_at_k(run[q], qrels[q], 100) for q in qids) / n,
        "mrr@10": sum(mrr_at_k(run[q], qrels[q], 10) for q in qids) / n,
        "n": n,
    }

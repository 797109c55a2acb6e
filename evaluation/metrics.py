"""Ranking metrics, bootstrap confidence intervals and a paired significance test.

Conventions (the same as trec_eval / ir_measures, which `tests/test_evaluation_metrics.py`
checks them against):

- A *ranking* is a list of task ids, best first; *gold* is the set of relevant ids (binary).
- Hit@k = 1 if any gold id is in the top k (ir_measures `Success@k`).
- P@k = |gold & top k| / k, the denominator is k even when fewer than k ids were returned.
- R@k = |gold & top k| / |gold|.  Accuracy rate = R@5 (paper §4.1).
- RR = 1 / rank of the first gold id in the whole ranking (0 when none is returned); MRR is
  its mean. Rankings are cut at the run depth (20 by default), so this is MRR@depth.
- nDCG@10 with binary gains: DCG = sum_i rel_i / log2(i + 1), IDCG over min(|gold|, 10) hits.

Graded judgements (BEIR qrels, used by kb/) go through the same functions: a binary gold set is
the qrel {id: 1}. nDCG uses linear gains as trec_eval's ndcg_cut, IDCG the ideal ordering of all
judged-relevant documents; "relevant" means relevance > 0; queries without relevant
judgements are skipped by `evaluate_run`.

Out-of-scope cases (empty gold) are not in-scope queries: they are excluded from these means
(as trec_eval excludes queries without qrels) and measured by `oos_fpr` instead.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

CUTOFFS = (1, 3, 5)
NDCG_DEPTH = 10
METRIC_KEYS = ("hit@1", "hit@3", "hit@5", "p@1", "p@3", "p@5", "r@1", "r@3", "r@5", "mrr", "ndcg@10")


def hit_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if any(t in gold for t in ranking[:k]) else 0.0


def precision_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return sum(1 for t in ranking[:k] if t in gold) / k


def recall_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return recall_at_k(ranking, dict.fromkeys(gold, 1), k)


def gold_rank(ranking: Sequence[str], gold: set[str]) -> int | None:
    """1-based rank of the best-placed gold id, None when no gold id was returned."""
    for position, task_id in enumerate(ranking, start=1):
        if task_id in gold:
            return position
    return None


def reciprocal_rank(ranking: Sequence[str], gold: set[str]) -> float:
    rank = gold_rank(ranking, gold)
    return 1.0 / rank if rank else 0.0


def ndcg_at(ranking: Sequence[str], gold: set[str], k: int = NDCG_DEPTH) -> float:
    return ndcg_at_k(ranking, dict.fromkeys(gold, 1), k)


def ndcg_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int = NDCG_DEPTH) -> float:
    """Graded nDCG@k: sum gain(d_i) / log2(i + 1) over the top k, over the ideal ordering's DCG."""
    dcg = sum(qrel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]) if qrel.get(d, 0) > 0)
    ideal = sorted((r for r in qrel.values() if r > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int) -> float:
    relevant = {d for d, r in qrel.items() if r > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranking: Sequence[str], qrel: Mapping[str, int], k: int = 10) -> float:
    return reciprocal_rank(ranking[:k], {d for d, r in qrel.items() if r > 0})


def evaluate_run(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict:
    """BEIR-style means over queries that have at least one relevant judgement."""
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


def per_query(ranking: Sequence[str], gold: Iterable[str]) -> dict[str, float]:
    """Every metric of one in-scope query."""
    gold = set(gold)
    row = {}
    for k in CUTOFFS:
        row[f"hit@{k}"] = hit_at(ranking, gold, k)
        row[f"p@{k}"] = precision_at(ranking, gold, k)
        row[f"r@{k}"] = recall_at(ranking, gold, k)
    row["mrr"] = reciprocal_rank(ranking, gold)
    row["ndcg@10"] = ndcg_at(ranking, gold)
    return row


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    if not rows:
        return {key: float("nan") for key in METRIC_KEYS}
    return {key: float(np.mean([r[key] for r in rows])) for key in METRIC_KEYS}


def bootstrap_ci(values: Sequence[float], seed: int, resamples: int = 1000,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean of per-query values (queries resampled with
    replacement, `resamples` times, numpy Generator seeded with `seed`)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def randomisation_test(a: Sequence[float], b: Sequence[float], seed: int, permutations: int = 10_000) -> float:
    """Two-sided paired randomisation (sign-flip) test of mean(a) - mean(b) (Smucker, Allan &
    Carterette, CIKM 2007): under H0 the two systems are exchangeable per query, so each
    per-query difference keeps or flips its sign with probability 1/2. Returns the p-value
    (with the +1 correction, so never 0)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diff.size == 0 or not np.any(diff):
        return 1.0
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(permutations, diff.size))
    extreme = np.count_nonzero(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12)
    return float((extreme + 1) / (permutations + 1))


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None

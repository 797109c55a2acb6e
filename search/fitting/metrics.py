"""How a weight set ranks the CV queries (search.fitting.cv), and the choices read off it.

In sample: `rankings` (the product's own rank_values on the cached signal values), `ranked_ids`
(the ids alone, search.prefilter.rank_ids: what the figures read) and `ranking_metrics` (MRR,
Hit@K of those ids); `choose_shortlist`, the shortlist depth: the smallest K whose CV
Hit@K is within one point of Hit@50. Cross-fitted, each fold ranked by weights fitted on the
OTHER folds only (the cross-fitting of Chernozhukov et al. 2018, "Double/debiased machine
learning for treatment and structural parameters", Econometrics Journal 21): `cross_fitted_rankings`,
`cross_fitted_gold_ranks` (a tie counts half: the mid-rank), `rank_summary`, `net_first_wins`, and
`choose_sparse_signals`, which keeps the degraded mode's fusion only where it is not below the
plain BM25 baseline (Robertson & Zaragoza 2009, "The probabilistic relevance framework: BM25 and
beyond"), the `exemplar` signal alone, on that MRR.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from search.fitting.cv import CVQuery
from search.fitting.weights import fit_weights
from search.prefilter import fuse, rank_ids, rank_values
from search.ranker import MODES, FusionWeights

K_VALUES = (5, 10, 15, 20, 30, 50)


def rankings(queries: Sequence[CVQuery], weights: FusionWeights, mode: str, depth: int = 50):
    """Per query, the PrefilterResult the product would give in `mode` (no pins: CV queries are
    unseen by construction)."""
    return [rank_values(q.tasks, q.values_for(mode), weights, depth, (), q.out_of_scope_similarity)
            for q in queries]


def ranked_ids(queries: Sequence[CVQuery], weights: FusionWeights, mode: str, depth: int = 50) -> list[list[str]]:
    """Per query, the ids of `rankings`' results in their order (search.prefilter.rank_ids: the same
    fusion and order, without each position's explained result), for ranking_metrics."""
    return [rank_ids(q.tasks, q.values_for(mode), weights, depth) for q in queries]


def ranking_metrics(queries: Sequence[CVQuery], ranked: Sequence[Sequence[str]]) -> dict:
    """MRR and Hit@K of the gold in each query's `ranked` ids (ranked_ids), in-scope queries only."""
    rr, hit = [], {k: [] for k in (1, 3, 5, *K_VALUES)}
    for q, ids in zip(queries, ranked):
        gold = set(q.case.gold)
        if not gold:
            continue
        rank = next((i for i, task_id in enumerate(ids) if task_id in gold), None)
        rr.append(0.0 if rank is None else 1.0 / (rank + 1))
        for k in hit:
            hit[k].append(rank is not None and rank < k)
    if not rr:
        return {"n": 0}
    return {"n": len(rr), "mrr": round(float(np.mean(rr)), 4),
            **{f"hit@{k}": round(float(np.mean(v)), 4) for k, v in sorted(hit.items())}}


def choose_shortlist(metrics: dict, default: int) -> int:
    if not metrics.get("n"):
        return default
    ceiling = metrics["hit@50"]
    return next((k for k in K_VALUES if metrics[f"hit@{k}"] >= ceiling - 0.01), max(K_VALUES))


def cross_fitted_rankings(queries: Sequence[CVQuery], prior: FusionWeights, mode: str, depth: int = 5,
                          signals: Sequence[str] | None = None, extra: Sequence[str] = ()):
    """Each fold's queries ranked with fusion weights fitted on the OTHER folds only (over
    `signals`, default all). Ranked with weights fitted on themselves, the CV queries look more
    certain (larger margins, higher top probabilities) than unseen queries will, and an
    abstention model learnt on them refuses too many real queries later."""
    folds = np.array([q.fold for q in queries])
    out: list = [None] * len(queries)
    for fold in np.unique(folds):
        others = [q for q, f in zip(queries, folds) if f != fold]
        weights = FusionWeights(*(fit_weights(others, m, prior.for_mode(m), signals=signals, extra=extra) if m == mode
                                  else prior.for_mode(m) for m in MODES))
        mine = [i for i, f in enumerate(folds) if f == fold]
        for i, result in zip(mine, rankings([queries[i] for i in mine], weights, mode, depth)):
            out[i] = result
    return out


# The plain baseline a customer would otherwise deploy, BM25 over one document per task holding
# its name, aliases, help and every case query, is the `exemplar` signal alone.
BASELINE_SIGNALS = ("exemplar",)


def cross_fitted_rank_metrics(queries: Sequence[CVQuery], prior: FusionWeights, mode: str,
                              signals: Sequence[str] | None = None) -> dict:
    """MRR and Hit@1 of the in-scope `queries`, each fold ranked by weights fitted on the other
    folds (cross_fitted_gold_ranks)."""
    return rank_summary(cross_fitted_gold_ranks(queries, prior, mode, signals))


def cross_fitted_gold_ranks(queries: Sequence[CVQuery], prior: FusionWeights, mode: str,
                            signals: Sequence[str] | None = None) -> list[float]:
    """Per in-scope query (fold by fold, in a fixed order: two calls on the same queries align),
    the gold's rank when its fold is ranked by weights fitted on the other folds
    (cross_fitted_rankings' protocol), computed on the fused scores directly: 1 + the number of
    tasks scored above it + half of those tied with it (a tie's order is arbitrary: by name)."""
    in_scope = [q for q in queries if q.case.gold]
    folds = np.array([q.fold for q in in_scope])
    ranks = []
    for fold in np.unique(folds):
        others = [q for q, f in zip(in_scope, folds) if f != fold]
        weights = fit_weights(others, mode, prior.for_mode(mode), signals=signals)
        for q in (q for q, f in zip(in_scope, folds) if f == fold):
            fused, _ = fuse(q.values_for(mode), weights)
            gold = fused[q.gold_rows()].max()
            ranks.append(1.0 + float(np.sum(fused > gold)) + 0.5 * (float(np.sum(fused == gold)) - 1.0))
    return ranks


def rank_summary(ranks: Sequence[float]) -> dict:
    """n, MRR and Hit@1 of the gold ranks `ranks`."""
    if not ranks:
        return {"n": 0}
    ranks = np.asarray(ranks)
    return {"n": len(ranks), "mrr": round(float(np.mean(1.0 / ranks)), 4), "hit@1": round(float(np.mean(ranks == 1.0)), 4)}


def choose_sparse_signals(queries: Sequence[CVQuery], prior: FusionWeights) -> tuple[tuple[str, ...] | None, dict]:
    """(signals, report): which sparse fusion the degraded mode keeps, decided on cross-fitted
    CV (weights fitted without the query's fold, so both candidates are judged on unseen
    queries): every sparse signal (None), or the baseline's exemplar BM25 alone where the fusion
    does not beat it on MRR. The in-sample CV figures flatter a fusion (its weights were fitted
    on those queries); on a catalog where the other signals only add noise, the fitted fusion
    fell below plain BM25 (Hit@1 0.823 vs 0.841 on a withheld intent catalog)."""
    fused = cross_fitted_rank_metrics(queries, prior, "sparse")
    alone = cross_fitted_rank_metrics(queries, prior, "sparse", BASELINE_SIGNALS)
    keep_fusion = not fused.get("n") or fused["mrr"] >= alone["mrr"]
    return (None if keep_fusion else BASELINE_SIGNALS), {"fusion": fused, "exemplar_alone": alone,
                                                         "kept": "fusion" if keep_fusion else "exemplar_alone"}


def net_first_wins(ranks: Sequence[float], baseline: Sequence[float]) -> dict:
    """Of the same queries (aligned gold ranks), those `ranks` put the gold first on and
    `baseline` does not (wins), and the other way round (losses)."""
    wins = sum(a == 1.0 and b != 1.0 for a, b in zip(ranks, baseline))
    losses = sum(b == 1.0 and a != 1.0 for a, b in zip(ranks, baseline))
    return {"wins": int(wins), "losses": int(losses)}

"""Per-catalog fitting: fusion weights, shortlist depth and abstention, by cross-validation on
the catalog's own test cases.

1. **CV signals** (`cv_queries`): the cases are split into folds (a hash of each query, so the
   split is stable as the suite grows); each fold's cases are scored by an index whose lexicon
   and exemplar memory are built from the OTHER folds only, exactly as an unseen query would be.
2. **Fusion weights** (`fit_weights`): a conditional-logit model (McFadden 1974; listwise
   softmax learning to rank, Cao et al. 2007),

       p(t | q) = exp(w . x(q, t)) / sum_u exp(w . x(q, u)),   maximise sum_q log p(gold | q)

   over standardised signals, with an L2 penalty that pulls w towards the shipped defaults
   (a Gaussian prior centred on them): a catalog with few cases stays close to the defaults,
   one with many moves as far as its evidence says. Fitted separately for the full mode and
   the degraded mode without embeddings. A linear model keeps every result explainable: the
   response's per-signal contributions are its terms.
3. **Shortlist depth**: the smallest K whose CV recall (Hit@K) is within one point of Hit@50.
4. **Abstention** (`fit_abstentions`, `fit_abstention`): logistic regression of "in scope" on the
   top answer's absolute evidence (search.confidence) against whatever negatives exist, and a
   split-conformal threshold on the in-scope cases' out-of-fold scores (`conformal_threshold`,
   at most ABSTAIN_BUDGET of answerable queries refused). Where the suite was written in runs of
   paraphrases (`written_together_range` > 1), it is fitted and calibrated on the cases scored
   again with each run in one fold (`calibration_queries`), as a new author's query would be.

The result is a `RankerParams` plus a report of the CV figures that chose it; the store keeps
both (ranker_fits) and every serving process ranks with the newest.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, fields, replace
from typing import Callable, Sequence

import numpy as np
from scipy import sparse

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import bucket, k_folds
from lexicon.rationale import build_lexicon, pin_key
from lexicon.text import terms
from search.confidence import ONE_CLASS_FEATURE, AbstentionModel, answer_features, features_for_mode, shown
from search.index import SearchIndex, build_index, embedding_text
from search.learned import (LearnedExemplar, build_learned_memory, learned_cases, learned_digest, normalised_query,
                            unclicked_digest,
                            unrelated_cosine)
from search.offtopic import load_offtopic
from search.prefilter import (LEARNED, QUERY_EVIDENCE, SIGNALS, SPARSE_SIGNALS, TYPING_SIGNALS, AnalysedQuery,
                              analyse_query, fuse, prefilter, rank_values, signal_values)
from search.prototypes import encode, fit_prototypes
from search.ranker import MODES, FusionWeights, RankerParams
from search.typed import TYPING_CLASSES
from settings import Settings, Weights

FOLDS = 5
MAX_CV_QUERIES = 3000
# The abstention's threshold is a tail quantile of the in-scope cases' CV scores: it is set on
# every in-scope case up to this many (calibration_queries), not on the weight fit's sample of
# MAX_CV_QUERIES. At a 5% budget the refusal rate a 3,000 sample promises has a standard error of
# 0.4 points, at 15,000 of 0.18 (CLINC150 full, no written negatives: val refusals 5.7% with the
# sample, 5.2% with all 15,000; docs/abstention.md). The cost: that fit takes 95 -> 128-145 s.
MAX_CALIBRATION_QUERIES = 20_000
# Abstention (fit_abstention): the default in-scope budget (settings.abstain_budget), the fewest
# negatives for a discriminative score (fewer: the one-class evidence alone), and the fewest
# in-scope CV queries to calibrate a threshold on. Negatives only shape the score; the threshold
# is set on in-scope cases alone, so a dozen negatives can no longer make it refuse more than
# the budget (they did, when they set the threshold: 15% of the demo's held-out queries).
DEFAULT_BUDGET = 0.05
MIN_NEGATIVES = 20
MIN_IN_SCOPE = 20
PRIOR_STRENGTH = 1.0         # L2 pull towards the defaults, in standardised units, per CV query mean
CANDIDATES = 100             # per query, the softmax of the fit runs over gold + this many best tasks
K_VALUES = (5, 10, 15, 20, 30, 50)


def cases_digest(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord]) -> str:
    """Names the data a fit was made on: the active task ids and every case's query and gold."""
    payload = json.dumps([sorted(t.id for t in tasks if t.active),
                          sorted([c.query, sorted(c.gold)] for c in cases)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CVQuery:
    """One held-out case's signal values over every active task, as the product computes them."""

    case: CaseRecord
    fold: int
    tasks: tuple[TaskRecord, ...]
    values: dict[str, np.ndarray]
    out_of_scope_similarity: float | None
    pinned: tuple[str, ...] = ()       # gold of a training case with this very query (held-out replay only)
    source: str = "case"               # "case" (a test case) or a kind of negative (fit_abstention)
    unfinished: int = 0                # the typing class (AnalysedQuery.unfinished), 0: a whole query

    def gold_rows(self) -> list[int]:
        gold = set(self.case.gold)
        return [i for i, t in enumerate(self.tasks) if t.id in gold]

    def values_for(self, mode: str) -> dict[str, np.ndarray]:
        if mode == "full":
            return self.values
        return {k: v for k, v in self.values.items() if k in SPARSE_SIGNALS or k in TYPING_SIGNALS or k in QUERY_EVIDENCE}


def attach_vectors(index: SearchIndex, embedder, task_vectors: np.ndarray | None = None) -> SearchIndex:
    """Embed what the index needs (task texts as passages, exemplars and out-of-scope cases as
    queries; each text once, ever, thanks to the embedder's cache) and attach the vectors."""
    if task_vectors is None:
        task_vectors = embedder.embed([embedding_text(t) for t in index.tasks], "passage")
    memory = index.exemplars
    exemplar_vectors = embedder.embed(list(memory.texts), "query") if memory.texts else np.zeros(
        (0, task_vectors.shape[1]), dtype=np.float32)
    oos_vectors = embedder.embed(list(memory.oos_texts), "query") if memory.oos_texts else None
    index = index.with_vectors(task_vectors, exemplar_vectors, oos_vectors)
    if index.learned is not None and index.exemplars.vectors is not None:
        floor = unrelated_cosine(index.exemplars.vectors, index.exemplars.task_rows)
        index = index.with_learned(index.learned.with_vectors(embedder.embed(list(index.learned.texts), "query"), floor))
    if index.written is not None:
        index = index.with_written(attach_vectors(index.written, embedder, task_vectors))
    return index


def prototypes_of(index: SearchIndex) -> np.ndarray | None:
    """Softmax-regression prototypes over the index's exemplars (search.prototypes)."""
    memory = index.exemplars
    if memory.vectors is None:
        return None
    return fit_prototypes(memory.vectors, memory.task_rows, memory.n_tasks, memory.centroids)


def negative_evidence(cases: Sequence[CaseRecord], offtopic: Sequence[str] = (), unclicked: Sequence[str] = ()
                      ) -> list[tuple[str, str]]:
    """(source, query) of the negatives beside the written out-of-scope cases: the generic
    off-topic memory (search.offtopic) and queries that repeatedly ended without a click (the
    learning-from-use hook), minus any query a test case already has (a case decides)."""
    known = {pin_key(c.query) for c in cases}
    out, seen = [], set()
    for source, queries in (("offtopic", offtopic), ("unclicked", unclicked)):
        for query in queries:
            key = pin_key(query)
            if key and key not in known and key not in seen:
                seen.add(key)
                out.append((source, query))
    return out


def _fold_index(settings: Settings, tasks, fit: Sequence[CaseRecord], embedder, task_vectors,
                learned: Sequence[LearnedExemplar], learned_as_cases: bool, held_queries: frozenset[str]) -> SearchIndex:
    """The index of one CV fold: its training cases (plus the learned exemplars of queries it does
    not hold out), with vectors and prototypes where there is an embedder."""
    if learned and learned_as_cases:
        fit = [*fit, *learned_cases(learned, held_queries)]
    index = build_index(tasks, build_lexicon(fit), settings.field_weights, cases=fit)
    if learned:
        index = index.with_learned(build_learned_memory([t.id for t in tasks], learned, held_queries))
    if embedder is not None:
        index = attach_vectors(index, embedder, task_vectors)
        index = index.with_prototypes(prototypes_of(index))
    return index


def cv_queries(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
               folds: int = FOLDS, seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
               progress: Callable | None = None, negatives: Sequence[tuple[str, str]] = (),
               learned: Sequence[LearnedExemplar] = (), learned_as_cases: bool = False,
               assignment: Sequence[int] | None = None,
               variants: Callable[[str], Sequence[str]] | None = None,
               keep: Callable[[AnalysedQuery], bool] | None = None,
               fold_indexes: dict | None = None) -> list[CVQuery]:
    """Signal values of the cases, each scored by an index built without its fold. With
    `max_queries`, a stable hash sample of the in-scope held-out queries plus every out-of-scope
    one is scored (each fold's index still learns from all the other folds' cases).
    `negatives` ((source, query), see negative_evidence) are each given a fold by the same hash
    and scored against that fold's index, as CV queries without gold of that source.
    `learned`: exemplars learned from use (search.learned); each fold's index has those whose
    query is not one of the fold's held-out queries, so the `learned` signal's weight is fitted
    on how well use predicts queries it has not seen. `learned_as_cases`: those exemplars also
    join the fold's cases (search.learned.learned_cases: exemplar memory and lexicon).
    `assignment`: each case's fold, when not the hash of its query (catalog.splits.k_folds): the
    abstention's calibration keeps cases written together in one fold (written_together_folds).
    `variants`: each held-out in-scope case is scored as these texts of its query instead (the
    prefixes a person types on the way to it: typing_cuts), gold unchanged; `keep`: which of the
    analysed queries are kept (typing_queries: those read as still being typed). `fold_indexes`:
    one fit's memo of the fold indexes it built (vectors and prototypes attached), keyed by their
    training cases: the typing and calibration passes reuse the fit's own folds where they are
    the same (the prototypes' regression is most of a fold's cost: 10 of the demo fit's 31 s went
    to building the typing pass's folds again). Not used with learned exemplars, whose memory
    depends on the held-out queries."""
    tasks = [t for t in tasks if t.active]
    negative_fold = [int(bucket(seed + 1, query) * folds) for _, query in negatives]
    sampled = None
    if max_queries is not None and len(cases) > max_queries:
        # every out-of-scope case is kept (they are few and they are what abstention learns from)
        oos = [c for c in cases if not c.gold]
        in_scope = sorted((c for c in cases if c.gold), key=lambda c: bucket(seed + 2, c.query))
        sampled = {c.query for c in [*oos, *in_scope[:max(max_queries - len(oos), 0)]]}
    task_vectors = None
    if embedder is not None:
        task_vectors = embedder.embed([embedding_text(t) for t in tasks], "passage")
    out: list[CVQuery] = []
    split = k_folds(list(cases), folds, seed) if assignment is None else [
        ([c for c, a in zip(cases, assignment) if a != f], [c for c, a in zip(cases, assignment) if a == f])
        for f in range(folds)]
    for fold, (fit, held) in enumerate(split):
        if sampled is not None:
            held = [c for c in held if c.query in sampled]
        if variants is not None:
            held = [replace(c, query=text) for c in held if c.gold for text in variants(c.query)]
        sources = ["case"] * len(held) + [source for (source, _), f in zip(negatives, negative_fold) if f == fold]
        held = held + [CaseRecord(query=query, gold=()) for (_, query), f in zip(negatives, negative_fold) if f == fold]
        if not held:
            continue
        held_queries = frozenset(normalised_query(c.query) for c in held)
        key = (embedder is not None, tuple((c.query, c.gold) for c in fit)) if not learned else None
        index = fold_indexes.get(key) if fold_indexes is not None and key is not None else None
        if index is None:
            index = _fold_index(settings, tasks, fit, embedder, task_vectors, learned, learned_as_cases, held_queries)
            if fold_indexes is not None and key is not None:
                fold_indexes[key] = index
        analysed = [analyse_query(index, c.query, settings.typo_min_similarity) for c in held]
        vectors = [None] * len(held)
        if embedder is not None:
            vectors = list(embedder.embed([a.embedding_text for a in analysed], "query"))
        rows, visible = index.visible(None, restrict=False)
        for case, query, vector, source in zip(held, analysed, vectors, sources):
            if keep is not None and not keep(query):
                continue
            values = signal_values(index, query, rows, vector)
            oos = index.exemplars.nearest_out_of_scope(vector) if vector is not None else None
            out.append(CVQuery(case, fold, visible, values, oos, source=source, unfinished=query.unfinished))
        if progress is not None:
            progress(fold + 1, folds)
    return out


# --- fusion weights ---------------------------------------------------------------------------

def design_matrices(queries: Sequence[CVQuery], names: Sequence[str], prior: Weights
                    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per in-scope query, its (candidates x signals) matrix and gold mask; candidates are the
    gold tasks plus the CANDIDATES best by the prior weights (all tasks in a small catalog)."""
    matrices, golds = [], []
    prior_w = np.array([getattr(prior, n) for n in names])
    for q in queries:
        gold = q.gold_rows()
        if not gold:
            continue
        X = np.stack([q.values[n] for n in names], axis=1).astype(np.float64)
        if X.shape[0] > CANDIDATES + len(gold):
            best = np.argpartition(-(X @ prior_w), CANDIDATES)[:CANDIDATES]
            keep = np.union1d(best, gold)
            mask = np.isin(keep, gold)
            X = X[keep]
        else:
            mask = np.zeros(X.shape[0], dtype=bool)
            mask[gold] = True
        matrices.append(X)
        golds.append(mask)
    return matrices, golds


def conditional_logit(matrices: Sequence[np.ndarray], golds: Sequence[np.ndarray], prior: np.ndarray,
                      strength: float) -> np.ndarray:
    """argmin_{w >= 0}  -1/n sum_q log sum_{g in gold(q)} softmax(X_q w)_g  +  strength/n ||w - prior||^2
    (the penalty weighs like `strength` queries' worth of evidence per unit of standardised weight)."""
    n = len(matrices)
    sizes = [len(X) for X in matrices]
    X = np.vstack(matrices)
    G = np.concatenate(golds).astype(np.float64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    starts = offsets[:-1]

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        s = X @ w
        top = np.maximum.reduceat(s, starts)
        e = np.exp(s - np.repeat(top, sizes))
        z = np.add.reduceat(e, starts)
        zg = np.add.reduceat(e * G, starts)
        loss = -np.sum(np.log(np.maximum(zg, 1e-300)) - np.log(z)) / n
        p = e / np.repeat(z, sizes)
        pg = e * G / np.repeat(np.maximum(zg, 1e-300), sizes)
        grad = (X.T @ (p - pg)) / n
        diff = w - prior
        return loss + strength * diff @ diff / n, grad + 2 * strength * diff / n

    # Non-negative weights: more evidence from a signal never lowers a task (monotone fusion). It
    # keeps contributions readable and the model stable where two signals overlap (e.g. lexical
    # and exemplar BM25 share the task text), instead of one cancelling the other.
    bounds = [(0.0, None)] * len(prior)
    from scipy.optimize import minimize  # lazy: 0.3 s of imports a search never needs

    return minimize(objective, np.maximum(prior, 0.0), jac=True, method="L-BFGS-B", bounds=bounds).x


def fit_weights(queries: Sequence[CVQuery], mode: str, prior: Weights, strength: float = PRIOR_STRENGTH,
                signals: Sequence[str] | None = None, extra: Sequence[str] = ()) -> Weights:
    """The mode's fusion weights (see the module docstring); `prior` where there is no evidence.
    `signals` restricts the model to those signals (the evaluation's ablations); the others get 0.
    `extra`: signals fitted beside the mode's own (the typing fit's TYPING_SIGNALS)."""
    wanted = (*((*SIGNALS, LEARNED) if mode == "full" else SPARSE_SIGNALS), *extra)
    if signals is not None:
        wanted = [n for n in wanted if n in signals]
        prior = Weights(**{f.name: (getattr(prior, f.name) if f.name in wanted else 0.0) for f in fields(Weights)})
    names = [n for n in wanted if queries and all(n in q.values for q in queries)]
    usable = list(queries) if names else []
    matrices, golds = design_matrices(usable, names, prior)
    if len(matrices) < 2:
        return prior
    return fit_standardised(matrices, golds, names, prior, strength, digits=4)


def fit_standardised(matrices: Sequence[np.ndarray], golds: Sequence[np.ndarray], names: Sequence[str],
                     prior: Weights, strength: float, digits: int) -> Weights:
    """The conditional logit on signals scaled to unit spread (so one penalty fits signals on
    different scales, raw cosines and [0, 1] scores alike), returned in raw units and rounded."""
    scale = np.vstack(matrices).std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    prior_std = np.array([getattr(prior, n) for n in names]) * scale
    w_std = conditional_logit([X / scale for X in matrices], golds, prior_std, strength)
    fitted = dict(zip(names, (w_std / scale).tolist()))
    return Weights(**{f.name: round(float(fitted.get(f.name, 0.0)), digits) for f in fields(Weights)})


# --- evaluation of a parameter set on CV queries ------------------------------------------------

def rankings(queries: Sequence[CVQuery], weights: FusionWeights, mode: str, depth: int = 50):
    """Per query, the PrefilterResult the product would give in `mode` (no pins: CV queries are
    unseen by construction)."""
    return [rank_values(q.tasks, q.values_for(mode), weights, depth, (), q.out_of_scope_similarity)
            for q in queries]


def ranking_metrics(queries: Sequence[CVQuery], results) -> dict:
    rr, hit = [], {k: [] for k in (1, 3, 5, *K_VALUES)}
    for q, result in zip(queries, results):
        gold = set(q.case.gold)
        if not gold:
            continue
        ids = [item.task.id for item in result.ranked]
        rank = next((i for i, task_id in enumerate(ids) if task_id in gold), None)
        rr.append(0.0 if rank is None else 1.0 / (rank + 1))
        for k in hit:
            hit[k].append(rank is not None and rank < k)
    if not rr:
        return {"n": 0}
    return {"n": len(rr), "mrr": round(float(np.mean(rr)), 4),
            **{f"hit@{k}": round(float(np.mean(v)), 4) for k, v in sorted(hit.items())}}


# The score-tail cut (search.confidence.shown): the largest ratio in TAIL_GRID whose
# CV Hit@5 of what is shown stays within TAIL_MAX_LOSS of showing all five.
TAIL_GRID = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
TAIL_MAX_LOSS = 0.005


def shown_metrics(queries: Sequence[CVQuery], results, ratio: float, k: int = 5) -> dict:
    """Of the top `k` of each in-scope query's ranking, what the tail cut at `ratio` shows: Hit@k
    of the shown list, results shown per query, and the share of shown results that are wrong
    (not gold)."""
    hit, sizes, wrong = [], [], []
    for q, result in zip(queries, results):
        gold = set(q.case.gold)
        if not gold or not result.ranked:
            continue
        kept = [item.task.id for item in shown(result.ranked[:k], ratio)]
        hit.append(bool(gold & set(kept)))
        sizes.append(len(kept))
        wrong.append(sum(task_id not in gold for task_id in kept))
    n = len(hit)
    return {"n": n, "ratio": ratio, "hit@5": round(float(np.mean(hit)), 4) if n else None,
            "shown": round(float(np.mean(sizes)), 3) if n else None,
            "wrong_share": round(sum(wrong) / sum(sizes), 4) if n and sum(sizes) else None}


def choose_tail_ratio(queries: Sequence[CVQuery], results) -> tuple[float, dict]:
    """(ratio, report): the largest TAIL_GRID ratio whose CV Hit@5 of what is shown is within
    TAIL_MAX_LOSS of the uncut list's; the report holds the uncut and the chosen operating point."""
    uncut = shown_metrics(queries, results, 0.0)
    if not uncut["n"]:
        return 0.0, {"uncut": uncut}
    best = uncut
    for ratio in TAIL_GRID[1:]:
        point = shown_metrics(queries, results, ratio)
        if point["hit@5"] >= uncut["hit@5"] - TAIL_MAX_LOSS:
            best = point
    return best["ratio"], {"uncut": uncut, "chosen": best}


def choose_shortlist(metrics: dict, default: int) -> int:
    if not metrics.get("n"):
        return default
    ceiling = metrics["hit@50"]
    return next((k for k in K_VALUES if metrics[f"hit@{k}"] >= ceiling - 0.01), max(K_VALUES))


# --- abstention ---------------------------------------------------------------------------------

L2_GRID = (0.3, 3.0, 30.0, 300.0)   # abstention model penalties tried by cross-fitting


def _logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, weight: np.ndarray | None = None
              ) -> tuple[np.ndarray, float]:
    """Weighted, L2-regularised logistic regression on standardised features (penalty
    l2 * ||w||^2 / n); `weight` per sample (default: class-balanced); weights returned in raw units."""
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    Z = (X - mean) / scale
    balance = class_balance(y) if weight is None else weight

    def objective(theta):
        w, b = theta[:-1], theta[-1]
        s = Z @ w + b
        p = 1.0 / (1.0 + np.exp(-s))
        loss = np.sum(balance * (np.logaddexp(0, s) - y * s)) / len(y) + l2 * w @ w / len(y)
        g = balance * (p - y) / len(y)
        return loss, np.append(Z.T @ g + 2 * l2 * w / len(y), g.sum())

    from scipy.optimize import minimize  # lazy: 0.3 s of imports a search never needs

    theta = minimize(objective, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B").x
    coef = theta[:-1] / scale
    return coef, float(theta[-1] - coef @ mean)


def class_balance(y: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
    """Sample weights: each class weighs half of the whole; within the negatives (y = 0) each
    source (written out-of-scope cases, the generic off-topic memory, unclicked queries) weighs
    the same, so a hundred written negatives of this catalog are not drowned by 749 generic ones."""
    weight = np.where(y == 1, 0.5 / max(y.mean(), 1e-9), 0.0)
    negative = y == 0
    if sources is None:
        return np.where(negative, 0.5 / max(negative.mean(), 1e-9), weight)
    kinds = np.unique(sources[negative])
    for kind in kinds:
        mine = negative & (sources == kind)
        weight[mine] = 0.5 / len(kinds) / mine.mean()
    return weight


def conformal_threshold(in_scope_scores: np.ndarray, budget: float) -> float:
    """Split-conformal threshold (Vovk et al. 2005; Angelopoulos & Bates 2021, "A gentle
    introduction to conformal prediction"): with s_(1) <= ... <= s_(n) the scores of n held-out
    in-scope queries and k = floor(budget * (n + 1)),

        answer  <=>  score >= s_(k)        (k < 1: answer everything)

    refuses an unseen in-scope query exchangeable with them with probability at most `budget`.
    It needs no negative example: negatives shape the score, the in-scope cases set the bar."""
    scores = np.sort(np.asarray(in_scope_scores, dtype=np.float64))
    k = int(np.floor(budget * (len(scores) + 1)))
    if k < 1 or not len(scores):
        return float("-inf")
    # halfway to the next lower score: the k-th score itself still answers, and so does a tie
    below = scores[k - 2] if k >= 2 else scores[0] - 1.0
    return float((scores[k - 1] + below) / 2) if scores[k - 1] > below else float(scores[k - 1])


def operating_point(logits: np.ndarray, oos: np.ndarray, hit5: np.ndarray, pinned: np.ndarray, t: float) -> dict:
    answered = pinned | (logits >= t)
    ins = ~oos
    return {"threshold": float(t),
            "hit@5": float(np.mean(answered[ins] & hit5[ins])) if ins.any() else None,
            "oos_fpr": float(np.mean(answered[oos])) if oos.any() else None,
            "in_scope_abstain": float(np.mean(~answered[ins])) if ins.any() else None}


def _cross_fitted(X: np.ndarray, y: np.ndarray, folds: np.ndarray, weight: np.ndarray) -> tuple[float, np.ndarray]:
    """(penalty, out-of-fold logits): each fold scored by a model fitted on the others, for each
    penalty of L2_GRID; the penalty with the lowest weighted out-of-fold log-loss wins.
    With a dozen negatives a weak penalty overfits them; the data, not a constant, says how
    strong it must be."""
    best = None
    for l2 in L2_GRID:
        logits = np.zeros(len(y))
        for fold in np.unique(folds):
            train = folds != fold
            coef, intercept = _logistic(X[train], y[train], l2, weight[train])
            logits[~train] = X[~train] @ coef + intercept
        loss = float(np.sum(weight * (np.logaddexp(0, logits) - y * logits)) / len(y))
        if best is None or loss < best[0]:
            best = (loss, l2, logits)
    return best[1], best[2]


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


def _rate(mask: np.ndarray, answered: np.ndarray) -> float | None:
    return round(float(np.mean(answered[mask])), 4) if mask.any() else None


# --- calibration on cases written together --------------------------------------------------

# A suite's cases are written in runs: one author, one sitting, five or ten paraphrases of one task
# that share a slot or a phrasing ("...my pnc account", "...my chase account"). Folds by a hash of
# the query scatter a run over every fold, so each held-out case still has its run-mates in the
# fold's memory and looks closer to the catalog than a query from a NEW author will (CLINC150:
# CV promised 5% refused, its separately-written val split got 8.2%). The calibration therefore
# keeps each run in one fold: blocked cross-validation (Roberts et al. 2017, "Cross-validation
# strategies for data with temporal, spatial, hierarchical, or phylogenetic structure",
# Ecography 40: blocks at least as long as the dependence range), the range measured on the
# suite itself. The blocks are as long as the folds allow (a fifth of the median task), not the
# measured range: that range is where the excess likeness stops being significant, a lower bound
# on how far runs reach, and the longer blocks, each hashed to a fold, also leave some tasks thinly
# covered in some folds, as real traffic covers some tasks' phrasings thinly. CLINC150 val, no
# written negatives: blocks of the range (10) refused 5.24% / 5.14% (embeddings on / off) against
# the 5% promised; blocks of 20, 4.4% / 4.6%, at 1 / 6 more of its 100 out-of-scope queries
# answered. Control: each fold exactly one contiguous fifth of every task refused 5.1% / 5.1%, so
# the gain is the uneven coverage, not longer runs (docs/abstention.md).
MAX_DEPENDENCE_LAG = 50      # the longest run looked for, in cases of one task
DEPENDENCE_Z = 2.0           # a lag is dependent while its excess similarity is this many standard errors
MAX_TASK_CASES = 1000        # per task, the first cases the range is measured on


def _task_runs(cases: Sequence[CaseRecord]) -> dict[str, list[int]]:
    """{task: indices of its in-scope cases, in the suite's order} (a case counts for its first gold)."""
    runs: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        if case.gold:
            runs.setdefault(case.gold[0], []).append(i)
    return runs


def _jaccard_matrix(term_sets: Sequence[frozenset[str]]) -> np.ndarray:
    """Pairwise Jaccard |a & b| / |a | b| of term sets (lexicon.text.jaccard), all pairs at once."""
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for i, terms_ in enumerate(term_sets):
        for term in terms_:
            rows.append(i)
            cols.append(vocabulary.setdefault(term, len(vocabulary)))
    B = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(term_sets), max(len(vocabulary), 1)))
    inter = (B @ B.T).toarray()
    size = np.asarray(B.sum(axis=1)).ravel()
    union = size[:, None] + size[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)


def written_together_range(cases: Sequence[CaseRecord], max_lag: int = MAX_DEPENDENCE_LAG,
                           z: float = DEPENDENCE_Z) -> int:
    """How many consecutive cases of one task (in the suite's order) were written together: the
    first lag d at which two cases d apart are no longer more alike than cases farther apart.

        s(d) = mean Jaccard(terms(case_i), terms(case_i+d))  over every task's consecutive cases,
        f(d) = the same mean over the pairs more than d apart,
        range = min { d >= 1 : (s(d) - f(d)) / SE(s(d)) < z }

    (a one-sided test at `z` standard errors; pooled over tasks). 1: no dependence on the order
    (a shuffled or a sampled suite), and the calibration keeps the ordinary hash folds. CLINC150's
    train split: 10 (its crowd workers wrote batches of five to ten paraphrases)."""
    lag_values: list[list[np.ndarray]] = [[] for _ in range(max_lag + 1)]
    far_sum = np.zeros(max_lag + 1)
    far_count = np.zeros(max_lag + 1)
    for indices in _task_runs(cases).values():
        indices = indices[:MAX_TASK_CASES]
        n = len(indices)
        if n < 3:
            continue
        J = _jaccard_matrix([frozenset(terms(cases[i].query)) for i in indices])
        total = (J.sum() - np.trace(J)) / 2
        pairs = n * (n - 1) / 2
        near_sum, near_count = 0.0, 0
        for d in range(1, min(max_lag, n - 1) + 1):
            diagonal = np.diagonal(J, d)
            lag_values[d].append(diagonal)
            near_sum += float(diagonal.sum())
            near_count += len(diagonal)
            far_sum[d] += total - near_sum
            far_count[d] += pairs - near_count
    for d in range(1, max_lag + 1):
        if not lag_values[d] or far_count[d] < 1:
            return d
        values = np.concatenate(lag_values[d])
        if len(values) < 2:
            return d
        se = float(values.std(ddof=1)) / np.sqrt(len(values))
        excess = float(values.mean()) - far_sum[d] / far_count[d]
        if excess <= 0 or (se > 0 and excess / se < z):
            return d
    return max_lag


def written_together_folds(cases: Sequence[CaseRecord], folds: int, seed: int, length: int) -> list[int]:
    """Each case's fold with every task's cases cut, in the suite's order, into blocks of
    `length`: a block's fold is the hash of its first query (catalog.splits.bucket, as k_folds
    hashes a single query, so length 1 gives k_folds' folds). Out-of-scope cases keep theirs."""
    assignment = [int(bucket(seed + 1, c.query) * folds) for c in cases]
    for indices in _task_runs(cases).values():
        for start in range(0, len(indices), max(length, 1)):
            block = indices[start:start + max(length, 1)]
            fold = int(bucket(seed + 1, cases[block[0]].query) * folds)
            for i in block:
                assignment[i] = fold
    return assignment


def calibration_blocks(cases: Sequence[CaseRecord]) -> tuple[int, int]:
    """(written_together_range, the calibration's block length): with any dependence on the
    order, blocks as long as the folds allow (the comment above MAX_DEPENDENCE_LAG), one fold's
    share of the median task, so that every fold's memory still has most of every task (the
    served catalog has all of it); 1 (hash folds) without."""
    written = written_together_range(cases)
    sizes = [len(indices) for indices in _task_runs(cases).values()]
    return written, (int(np.median(sizes)) // FOLDS if sizes and written > 1 else 1)


def calibration_queries(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
                        queries: Sequence[CVQuery], seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
                        negatives: Sequence[tuple[str, str]] = (), learned: Sequence[LearnedExemplar] = (),
                        max_calibration: int | None = MAX_CALIBRATION_QUERIES,
                        fold_indexes: dict | None = None) -> tuple[Sequence[CVQuery], dict]:
    """(CV queries, report): those the abstention is fitted and calibrated on. Where the suite's
    cases were written in runs (written_together_range > 1), the cases scored again with each run
    in one fold (written_together_folds), so that no held-out case has its run-mates in memory;
    otherwise the fit's hash-fold CV `queries` (scored for `max_queries`). A block is the median
    task's cases / FOLDS long, as long as the folds allow (hash folds where that is under 2).
    Either way up to `max_calibration` in-scope cases are scored (MAX_CALIBRATION_QUERIES): where
    the fit's CV sampled fewer, the hash folds are scored again for more. `negatives` and
    `learned`: as given to cv_queries for `queries`; `fold_indexes`: see cv_queries."""
    written, length = calibration_blocks(cases)
    # more than the fit's CV scored: it sampled, and the calibration may take more
    more = (max_queries is not None and len(cases) > max_queries
            and (max_calibration is None or max_calibration > max_queries))
    wider = max_calibration if more else max_queries
    if length <= 1:
        how = {"folds": "hash", "written_together": written}
        if not more:
            return queries, how
        return cv_queries(settings, tasks, cases, embedder, FOLDS, seed, wider, None, negatives, learned,
                          fold_indexes=fold_indexes), how
    assignment = written_together_folds(cases, FOLDS, seed, length)
    calibration = cv_queries(settings, tasks, cases, embedder, FOLDS, seed, wider, None, negatives, learned,
                             assignment=assignment, fold_indexes=fold_indexes)
    return calibration, {"folds": "blocked", "written_together": written, "block": length}


def fit_abstention(queries: Sequence[CVQuery], weights: FusionWeights, mode: str,
                   budget: float = DEFAULT_BUDGET, signals: Sequence[str] | None = None,
                   typing: Sequence[CVQuery] = (), typing_weights: FusionWeights | None = None
                   ) -> AbstentionModel | None:
    """The abstention model of `mode` (search.confidence): a score, then a conformal threshold.

    Score: with at least MIN_NEGATIVES negatives (CV queries without gold: written out-of-scope
    cases, generic off-topic queries, unclicked queries; see CVQuery.source), a weighted logistic
    regression of "in scope" on the top answer's features (class_balance), its penalty chosen on
    cross-fitted log-loss; with fewer, the one-class evidence alone (ONE_CLASS_FEATURE).
    Threshold: conformal_threshold of the OUT-OF-FOLD scores of the in-scope queries at `budget`.
    Everything it learns from is cross-fitted: the rankings (fusion weights fitted without the
    query's fold, starting from `weights`) and the scores the threshold is set on, so the share
    of in-scope queries it refuses is the one unseen queries will see. None without enough
    in-scope queries to calibrate (fewer than 1 / budget). `signals`: the fusion's signals, when
    the fit kept only some (choose_sparse_signals)."""
    results = cross_fitted_rankings(queries, weights, mode, signals=signals)
    negative = np.array([not q.case.gold for q in queries])
    if (~negative).sum() < max(MIN_IN_SCOPE, int(np.ceil(1.0 / max(budget, 1e-9)))):
        return None
    names = features_for_mode(mode)
    X = np.array([[answer_features(r).get(n, 0.0) for n in names] for r in results], dtype=np.float64)
    y = (~negative).astype(np.float64)
    sources = np.array([q.source for q in queries])
    hit5 = np.array([bool(set(q.case.gold) & {i.task.id for i in r.ranked[:5]}) for q, r in zip(queries, results)])
    folds = np.array([q.fold for q in queries])
    both = all(0 < y[folds != fold].sum() < (folds != fold).sum() for fold in np.unique(folds))
    if negative.sum() >= MIN_NEGATIVES and both:
        weight = class_balance(y, sources)
        l2, logits = _cross_fitted(X, y, folds, weight)
        coef, intercept = _logistic(X, y, l2, weight)
        kind = "discriminative"
    else:
        # one-class: the evidence alone; nothing is fitted, so its CV scores are out-of-fold already
        column = names.index(ONE_CLASS_FEATURE[mode])
        coef, intercept, l2, kind = np.eye(len(names))[column], 0.0, None, "one-class"
        logits = X[:, column]
    threshold = conformal_threshold(logits[~negative], budget)
    answered = logits >= threshold
    point = operating_point(logits, negative, hit5, np.zeros(len(queries), dtype=bool), threshold)
    point.update(
        budget=budget, kind=kind, l2=l2, cross_fitted=True, n_in_scope=int((~negative).sum()),
        n_negatives={str(k): int(((sources == k) & negative).sum()) for k in np.unique(sources[negative])},
        hit5_answer_all=round(float(np.mean(hit5[~negative])), 4),
        # the share of each kind of negative still answered (CV, out of fold)
        oos_fpr=_rate(negative & (sources == "case"), answered),
        negatives_answered={str(k): _rate(negative & (sources == k), answered) for k in np.unique(sources[negative])})
    if not np.isfinite(threshold):
        point["threshold"] = None
    typing_threshold = None
    if typing and typing_weights is not None:
        # the prefixes' scores under the model fitted above on whole queries (their rankings are
        # cross-fitted; the model is not, but no prefix is among what it was fitted on)
        typed = cross_fitted_rankings(typing, typing_weights, mode, signals=typing_signals(signals), extra=TYPING_SIGNALS)
        features = np.array([[answer_features(r).get(n, 0.0) for n in names] for r in typed], dtype=np.float64)
        typed_logits = features @ np.asarray(coef, dtype=np.float64) + intercept
        pooled = conformal_threshold(typed_logits, budget)
        classes = np.array([q.unfinished for q in typing])
        # one threshold per typing class (search.typed.TYPING_CLASSES), the pooled one where a
        # class has too few prefixes to set its own (fewer than 1 / budget)
        thresholds = tuple(conformal_threshold(typed_logits[classes == c], budget)
                           if (classes == c).sum() >= np.ceil(1.0 / max(budget, 1e-9)) else pooled
                           for c in range(1, len(TYPING_CLASSES) + 2))
        typed_hit5 = [bool(set(q.case.gold) & {i.task.id for i in r.ranked[:5]}) for q, r in zip(typing, typed)]
        refused = typed_logits < np.array([thresholds[c - 1] for c in classes])
        point["typing"] = {
            "n": len(typing), "thresholds": [round(t, 6) if np.isfinite(t) else None for t in thresholds],
            "n_per_class": [int((classes == c).sum()) for c in range(1, len(thresholds) + 1)],
            "in_scope_abstain": round(float(np.mean(refused)), 4),
            "in_scope_abstain_whole_threshold": round(float(np.mean(typed_logits < threshold)), 4),
            "hit5_answer_all": round(float(np.mean(typed_hit5)), 4)}
        typing_threshold = tuple(round(t, 6) if np.isfinite(t) else -1e9 for t in thresholds)
    return AbstentionModel(tuple(names), tuple(round(float(c), 6) for c in coef), round(float(intercept), 6),
                           round(threshold, 6) if np.isfinite(threshold) else -1e9, point, typing_threshold)


def fit_abstentions(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
                    queries: Sequence[CVQuery], modes: Sequence[str], prior: FusionWeights,
                    signals: dict[str, Sequence[str] | None], seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
                    negatives: Sequence[tuple[str, str]] = (), learned: Sequence[LearnedExemplar] = (),
                    typing: Sequence[CVQuery] = (), typing_weights: FusionWeights | None = None,
                    fold_indexes: dict | None = None) -> dict[str, AbstentionModel | None]:
    """{mode: abstention model} of a fit (fit_abstention), on the calibration queries
    (calibration_queries: the fit's CV `queries`, or the cases scored again with the runs they
    were written in kept in one fold); each model's `cv` says which (`calibration`)."""
    calibration, how = calibration_queries(settings, tasks, cases, embedder, queries, seed, max_queries, negatives,
                                           learned, fold_indexes=fold_indexes)
    out: dict[str, AbstentionModel | None] = {"full": None}
    for mode in modes:
        model = fit_abstention(calibration, prior, mode, settings.abstain_budget, signals.get(mode), typing,
                               typing_weights)
        out[mode] = replace(model, cv={**model.cv, "calibration": how}) if model is not None else None
    return out


# --- a query still being typed ----------------------------------------------------------------

# The widget asks after every keystroke, so most queries the ranking meets are prefixes of what
# the person will have typed. The typing fit scores prefixes of the catalog's own cases (cut
# where people are seen mid-word: after 3, 5 and 8 characters, and halfway through the last
# word) in each case's CV fold, keeps those the prefilter reads as unfinished (search.typed), and
# fits the weights such a query is ranked with (TYPING_SIGNALS among them: how much the dense signals
# should count on a fragment is the fit's to say) and the abstention's typing threshold.
TYPING_CUTS = (3, 5, 8)
MAX_TYPING_CASES = 600   # in-scope cases whose prefixes are scored (a stable hash sample)


def typing_cuts(query: str) -> list[str]:
    """The prefixes of `query` a person has typed on the way to it: the first 3, 5 and 8
    characters and the query cut halfway through its last word, at least two characters and
    shorter than the query, once each. A cut keeps the space typed after its last word (a
    finished word: AnalysedQuery.finished), as the widget sends it."""
    text = query.strip()
    last = text.split()[-1] if text.split() else ""
    cuts = [text[:n] for n in TYPING_CUTS] + ([text[:len(text) - (len(last) + 1) // 2]] if len(last) > 1 else [])
    return list(dict.fromkeys(c for c in cuts if 2 <= len(c.strip()) and c.strip() != text))


def typing_signals(signals: Sequence[str] | None) -> Sequence[str] | None:
    return None if signals is None else (*signals, *TYPING_SIGNALS)


def typing_queries(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
                   seed: int = 42, max_cases: int = MAX_TYPING_CASES, fold_indexes: dict | None = None
                   ) -> list[CVQuery]:
    """The CV-scored prefixes (typing_cuts) of up to `max_cases` in-scope cases, each in its
    case's calibration fold (blocked where the suite was written in runs, calibration_blocks), so
    that a prefix never has its own whole query in memory."""
    _, length = calibration_blocks(cases)
    assignment = written_together_folds(cases, FOLDS, seed, length) if length > 1 else None
    return cv_queries(settings, tasks, cases, embedder, FOLDS, seed, max_cases, assignment=assignment,
                      variants=typing_cuts, keep=lambda analysed: analysed.unfinished, fold_indexes=fold_indexes)


def fit_typing(queries: Sequence[CVQuery], weights: FusionWeights, defaults: FusionWeights, modes: Sequence[str],
               signals: dict[str, Sequence[str] | None]) -> FusionWeights | None:
    """The typing weights of each mode, fitted on the typed prefixes `queries`, starting from the
    whole-query `weights` with the defaults' TYPING_SIGNALS weights; None without enough prefixes."""
    if sum(1 for q in queries if q.case.gold) < MIN_IN_SCOPE:
        return None
    fitted = {}
    for mode in MODES:
        prior = replace(weights.for_mode(mode), **{name: getattr(defaults.for_mode(mode), name) for name in TYPING_SIGNALS})
        fitted[mode] = (fit_weights(queries, mode, prior, signals=typing_signals(signals.get(mode)), extra=TYPING_SIGNALS)
                        if mode in modes else prior)
    return FusionWeights(fitted["full"], fitted["sparse"])


# --- the degraded mode never below plain BM25 ---------------------------------------------------

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


# The `learned` signal must put the gold first on this many more held-out queries than it loses.
LEARNED_SIGNAL_NET_WINS = 3


def choose_learned_signal(queries: Sequence[CVQuery], prior: FusionWeights, fitted: Weights
                          ) -> tuple[Weights, dict | None]:
    """The full mode's weights with the `learned` signal kept only where cross-fitted CV says it
    earns its place (the protocol of choose_sparse_signals): the in-scope queries' MRR, each
    fold ranked by weights fitted on the other folds with the signal and without it; the signal
    stays only when that MRR is higher with it and it puts the gold first on at least
    LEARNED_SIGNAL_NET_WINS (3) more of the same queries than it loses (`net_first_wins`).
    In-sample, its weight is fitted on the very queries that judge it: with a few learned pairs
    (CLINC150 simulator, 500 and 1,000 searches) it took weights of 9-13 while val Hit@1 fell by
    0.5-0.8 points. And a higher MRR alone can be one query: a right pair that helps the one
    held-out case near it bought the signal a weight for every pair beside it, a wrong one
    included; two networks can make at most 2 pairs count (search.learned.heavy_networks), so
    they must not be able to buy a weight with 1 or 2 (issue 33 item 1). `fitted` as it is, and
    no report, where the in-sample fit gave the signal no weight."""
    if not fitted.learned:
        return fitted, None
    with_ranks = cross_fitted_gold_ranks(queries, prior, "full")
    without_ranks = cross_fitted_gold_ranks(queries, prior, "full", SIGNALS)
    with_signal, without = rank_summary(with_ranks), rank_summary(without_ranks)
    first = net_first_wins(with_ranks, without_ranks)
    keep = (bool(with_signal.get("n")) and with_signal["mrr"] > without["mrr"]
            and first["wins"] - first["losses"] >= LEARNED_SIGNAL_NET_WINS)
    report = {"with": with_signal, "without": without, "first_hits": first, "kept": keep}
    return (fitted if keep else fit_weights(queries, "full", prior.full, signals=SIGNALS)), report


def net_first_wins(ranks: Sequence[float], baseline: Sequence[float]) -> dict:
    """Of the same queries (aligned gold ranks), those `ranks` put the gold first on and
    `baseline` does not (wins), and the other way round (losses)."""
    wins = sum(a == 1.0 and b != 1.0 for a, b in zip(ranks, baseline))
    losses = sum(b == 1.0 and a != 1.0 for a, b in zip(ranks, baseline))
    return {"wins": int(wins), "losses": int(losses)}


# --- the whole fit ------------------------------------------------------------------------------

def usable_learned(learned: Sequence[LearnedExemplar], blocked: frozenset[tuple[str, str]],
                   tasks: Sequence[TaskRecord]) -> tuple[LearnedExemplar, ...]:
    """The learned exemplars the fit may use: not blocked by the admin, on an active task."""
    active = {t.id for t in tasks if t.active}
    return tuple(e for e in learned if (e.query, e.task_id) not in blocked and e.task_id in active)


def informative_learned(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
                        defaults: RankerParams, learned: Sequence[LearnedExemplar]) -> tuple[LearnedExemplar, ...]:
    """The learned pairs that tell the ranking something: those whose task the ranking from the
    written cases alone (`first_written_answers`) does not already put first for the pair's
    query. Only these feed the `learned` signal in the CV that weighs it (fit_ranker's first
    pass, choose_learned_signal); serving then holds every usable pair.

    Why (issue 33 item 1): a click on what the ranking already puts first is no evidence that
    the `learned` signal knows better than the written cases. Cover traffic of that kind is free
    to make (the demo's public test-case queries + " please", each clicked on its top result),
    and it leaked the written cases into the signal: in the CV each held-out case found its gold
    through "<its query> please", so the signal looked predictive (weight 20 over 121 such
    pairs) and a wrong task clicked at rank 10 by the same two networks rose to rank 3. A pair
    that moves a task up, by contrast, must earn the weight on the written cases.

    The as-cases test (choose_learned_as_cases) still weighs every pair, by McNemar on the
    written cases: there the agreeing pairs are what generalises (judged on the informative
    pairs alone, the simulator's 4,000 searches gave val Hit@1 0.790 instead of 0.865: no
    exemplars taken)."""
    if not learned:
        return ()
    first = first_written_answers(settings, tasks, cases, embedder, defaults, sorted({e.query for e in learned}))
    return tuple(e for e in learned if first.get(e.query) != e.task_id)


def first_written_answers(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
                          defaults: RankerParams, queries: Sequence[str]) -> dict[str, str | None]:
    """query -> the task the catalog indexed from its written cases alone ranks first for it,
    with the default weights of the fit's primary mode (full with embeddings, else sparse),
    every task visible (None: nothing ranked)."""
    index = build_index(tasks, build_lexicon(cases), settings.field_weights, cases=cases)
    if embedder is not None:
        index = attach_vectors(index, embedder)
    analysed = [analyse_query(index, q, settings.typo_min_similarity) for q in queries]
    vectors = embedder.embed([a.embedding_text for a in analysed], "query") if embedder is not None else None
    first: dict[str, str | None] = {}
    for i, (query, a) in enumerate(zip(queries, analysed)):
        result = prefilter(index, a, defaults.weights, k=1, restrict_roles=False,
                           query_vector=vectors[i] if vectors is not None else None)
        first[query] = result.ranked[0].task.id if result.ranked else None
    return first


def abstention_negatives(settings: Settings, cases: Sequence[CaseRecord], unclicked: Sequence[str] = ()
                         ) -> list[tuple[str, str]]:
    """The negatives a fit scores beside the written out-of-scope cases: the shipped generic
    off-topic memory (unless ABSTAIN_OFFTOPIC=0) and `unclicked`, queries that repeatedly ended
    without a click (supplied by the learning-from-use aggregates)."""
    return negative_evidence(cases, load_offtopic() if settings.abstain_offtopic else (), unclicked)


# One-sided McNemar test (normal approximation) on paired Hit@1, for "learned exemplars as cases".
PAIRED_Z = 1.645


def paired_first_hits(queries_a: Sequence[CVQuery], results_a, queries_b: Sequence[CVQuery], results_b,
                      z: float = PAIRED_Z) -> dict:
    """Whether ranking B finds the gold first on significantly more of the same queries than A:
    with w the queries only B gets right at rank 1 and l those only A does (McNemar 1947;
    one-sided, normal approximation),

        better  <=>  w - l > z * sqrt(w + l)

    A difference of a query or two on a few hundred CV queries is noise, and a change that wins
    on noise (wrong learned pairs, measured: +2 of 206 demo queries) must not be taken."""
    def first_hits(queries, results) -> dict[str, bool]:
        return {q.case.query: bool(r.ranked) and r.ranked[0].task.id in q.case.gold for q, r in zip(queries, results)}

    a, b = first_hits(queries_a, results_a), first_hits(queries_b, results_b)
    shared = a.keys() & b.keys()
    wins = sum(b[q] and not a[q] for q in shared)
    losses = sum(a[q] and not b[q] for q in shared)
    return {"n": len(shared), "wins": wins, "losses": losses,
            "better": wins - losses > z * float(np.sqrt(wins + losses)) if wins + losses else False}


def choose_learned_as_cases(settings: Settings, tasks, cases, embedder, seed: int, max_queries: int | None,
                            learned: Sequence[LearnedExemplar], defaults: RankerParams,
                            queries: Sequence[CVQuery], weights: FusionWeights, report: dict, mode: str = "full",
                            negatives: Sequence[tuple[str, str]] = (), signals: dict | None = None
                            ) -> tuple[Sequence[CVQuery], FusionWeights, bool]:
    """Whether the learned exemplars should also join the exemplar memory and lexicon
    (search.learned.learned_cases), decided by the same CV: the written cases' held-out folds
    are scored by indexes with and without them (each fold without its own queries) and the
    weights fitted on each; the learned exemplars become cases only when that raises the CV
    Hit@1 of `mode` (the fit's primary mode: full, or sparse without embeddings) by more than
    noise (paired_first_hits, on the same written cases).
    A catalog where use does not generalise keeps the `learned` signal alone (or nothing).
    Returns (queries, weights, as_cases); the report's cv[mode] gets `fitted_learned_as_cases`."""
    alternative = cv_queries(settings, tasks, cases, embedder, FOLDS, seed, max_queries, None, negatives=negatives,
                             learned=learned, learned_as_cases=True)
    in_scope = [q for q in alternative if q.case.gold]
    signals = signals or {}
    modes = [m for m in report["cv"] if m in MODES]
    full = weights.full
    if "full" in modes:
        full, guard = choose_learned_signal(alternative, defaults.weights,
                                            fit_weights(alternative, "full", defaults.weights.full))
        if guard is not None:
            report["cv"]["full"]["learned_signal_with_cases"] = guard
    candidate = FusionWeights(full, fit_weights(alternative, "sparse", defaults.weights.sparse,
                                                signals=signals.get("sparse")))
    with_cases = ranking_metrics(in_scope, rankings(in_scope, candidate, mode))
    report["cv"][mode]["fitted_learned_as_cases"] = with_cases
    same = [q for q in queries if q.case.gold]
    test = paired_first_hits(same, rankings(same, weights, mode), in_scope, rankings(in_scope, candidate, mode))
    report["cv"][mode]["learned_as_cases_test"] = test
    if test["better"]:
        for m in modes:   # a degraded server holds the same exemplars (the sparse exemplar document)
            before = report["cv"][m]["fitted"]
            report["cv"][m].update(defaults=ranking_metrics(in_scope, rankings(in_scope, defaults.weights, m)),
                                   fitted=ranking_metrics(in_scope, rankings(in_scope, candidate, m)))
            report["cv"][m]["fitted_learned_signal_only" if m == "full" else "fitted_without_learned"] = before
        return alternative, candidate, True
    return queries, weights, False


def fit_ranker(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
               defaults: RankerParams, seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
               progress: Callable | None = None, queries: Sequence[CVQuery] | None = None,
               unclicked: Sequence[str] = (), learned: Sequence[LearnedExemplar] = (),
               blocked: frozenset[tuple[str, str]] = frozenset(),
               fold_indexes: dict | None = None) -> tuple[RankerParams, dict]:
    """Fit every parameter on CV inside `cases`; returns (params, report). With fewer than
    settings.fit_min_cases in-scope cases the defaults are returned (and the report says so).
    `queries`: the CV queries of these cases (with their negatives, `abstention_negatives`),
    when the caller has them already; `unclicked`: see abstention_negatives.
    `learned`: exemplars learned from use (search.learned.eligible), minus the `blocked`
    (query, task) pairs; the CV decides whether they feed the `learned` signal (dense: with
    embeddings only) and whether they join the exemplar memory (choose_learned_as_cases); the
    signal's CV holds only the informative ones (informative_learned: issue 33 item 1). A caller
    that passes `queries` built with every pair (evaluation.evaluate) has the signal weighed on
    them all. `fold_indexes`: the memo of fold indexes the caller's CV `queries` filled (cv_queries)."""
    started = time.perf_counter()
    fold_indexes = {} if fold_indexes is None else fold_indexes
    tasks = [t for t in tasks if t.active]
    learned = usable_learned(learned, blocked, tasks)   # without embeddings: only as cases (the signal is dense)
    in_scope = [c for c in cases if c.gold]
    report: dict = {"n_cases": len(cases), "n_in_scope": len(in_scope), "n_out_of_scope": len(cases) - len(in_scope),
                    "folds": FOLDS, "seed": seed, "digest": cases_digest(tasks, cases)}
    if len(in_scope) < settings.fit_min_cases:
        report["status"] = f"defaults: fewer than {settings.fit_min_cases} in-scope test cases"
        return defaults, report
    negatives = abstention_negatives(settings, cases, unclicked)
    # the `learned` signal's weight is judged on the pairs that tell the ranking something
    informative = informative_learned(settings, tasks, cases, embedder, defaults, learned) if learned else ()
    if queries is None:
        queries = cv_queries(settings, tasks, cases, embedder, FOLDS, seed, max_queries, progress, negatives, informative,
                             fold_indexes=fold_indexes)
    modes = [m for m in MODES if m == "sparse" or embedder is not None]
    sparse_signals, sparse_choice = choose_sparse_signals(queries, defaults.weights)
    signals = {"full": None, "sparse": sparse_signals}
    fitted = {m: fit_weights(queries, m, defaults.weights.for_mode(m), signals=signals[m]) for m in modes}
    learned_signal = None
    if "full" in fitted:
        fitted["full"], learned_signal = choose_learned_signal(queries, defaults.weights, fitted["full"])
    weights = FusionWeights(fitted.get("full", defaults.weights.full), fitted["sparse"])
    report["cv"] = {}
    in_scope_queries = [q for q in queries if q.case.gold]
    for mode in modes:
        before = ranking_metrics(in_scope_queries, rankings(in_scope_queries, defaults.weights, mode))
        after = ranking_metrics(in_scope_queries, rankings(in_scope_queries, weights, mode))
        report["cv"][mode] = {"defaults": before, "fitted": after}
        if learned and mode == "full":
            report["cv"][mode]["fitted_without_learned"] = ranking_metrics(
                in_scope_queries, rankings(in_scope_queries, FusionWeights(replace(weights.full, learned=0.0), weights.sparse), mode))
    report["cv"]["sparse"]["cross_fitted"] = sparse_choice
    if learned_signal is not None:
        report["cv"]["full"]["learned_signal"] = learned_signal
    as_cases = False
    primary = "full" if "full" in modes else "sparse"
    # The abstention is calibrated on the written cases scored without learned exemplars: with
    # them, a held-out written case often has a near-duplicate among the queries people typed
    # (one CLINC150 intent's phrasings came in batches) and its CV evidence runs optimistic, so the
    # threshold would refuse more of the answerable queries than the budget allows (simulator,
    # docs/learning-from-use.md). Served queries only gain evidence from the learned exemplars.
    calibration = queries
    if learned:
        queries, weights, as_cases = choose_learned_as_cases(settings, tasks, cases, embedder, seed, max_queries,
                                                             learned, defaults, queries, weights, report, primary,
                                                             negatives, signals)
    shortlist = choose_shortlist(report["cv"][primary]["fitted"], defaults.shortlist_size)
    typed = typing_queries(settings, tasks, cases, embedder, seed, fold_indexes=fold_indexes)
    typing = fit_typing(typed, weights, defaults.weights, modes, signals) or FusionWeights(
        *(replace(weights.for_mode(m), **{name: getattr(defaults.weights.for_mode(m), name) for name in TYPING_SIGNALS})
          for m in MODES))
    if typing is not None:
        report["cv"]["typing"] = {mode: {"whole_weights": ranking_metrics(typed, rankings(typed, weights, mode)),
                                         "typing_weights": ranking_metrics(typed, rankings(typed, typing, mode))}
                                  for mode in modes}
    abstention = fit_abstentions(settings, tasks, cases, embedder, calibration, modes, defaults.weights, signals,
                                 seed, max_queries, negatives, informative, typed, typing, fold_indexes)
    # the score-tail cut of each mode, on the rankings the fit's own weights give the CV queries
    # (each mode's probabilities have their own spread: one ratio for both cut the degraded mode's
    # CLINC150 val found@5 0.929 -> 0.909)
    tail = {}
    for mode in modes:
        whole_ratio, whole_report = choose_tail_ratio(in_scope_queries, rankings(in_scope_queries, weights, mode))
        typing_ratio, typing_report = choose_tail_ratio(typed, rankings(typed, typing, mode))
        tail[mode] = (whole_ratio, typing_ratio)
        report["cv"][mode]["tail"] = {"whole": whole_report, "typing": typing_report}
    stored_prototypes = None
    if embedder is not None:
        index_cases = [*cases, *learned_cases(learned)] if as_cases else cases   # the exemplars serving will hold
        index = attach_vectors(build_index(tasks, build_lexicon(index_cases), settings.field_weights,
                                           cases=index_cases), embedder)
        matrix = prototypes_of(index)
        if matrix is not None:
            stored_prototypes = {"task_ids": [t.id for t in index.tasks], "matrix": encode(matrix)}
            if as_cases:   # the written cases' own: contributions.learned's counterfactual (search.index)
                written = attach_vectors(build_index(tasks, build_lexicon(cases), settings.field_weights, cases=cases),
                                         embedder)
                stored_prototypes["written_matrix"] = encode(prototypes_of(written))
    used = (embedder is not None and weights.full.learned > 0) or as_cases
    params = RankerParams(weights, shortlist, abstention, "fit", None, stored_prototypes,
                          learned=tuple(learned) if used else (), learned_as_cases=as_cases, typing=typing,
                          tail=tail)
    if learned:
        report["learned"] = {"pairs": len(learned), "informative": len(informative), "digest": learned_digest(learned),
                             "weight": weights.full.learned if embedder is not None else None,
                             "as_cases": as_cases, "used": used}
    if unclicked:
        report["unclicked"] = {"queries": len(unclicked), "digest": unclicked_digest(unclicked),
                               "negatives": sum(q.source == "unclicked" for q in calibration)}
    report.update(status="fitted", n_cv_queries=sum(q.source == "case" for q in queries),
                  n_cv_negatives=sum(q.source != "case" for q in queries), shortlist_size=shortlist,
                  abstention={m: (a.cv if a else None) for m, a in abstention.items()},
                  seconds=round(time.perf_counter() - started, 2))
    return params, report

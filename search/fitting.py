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
4. **Abstention** (`fit_abstention`): logistic regression of "in scope" on the top answer's
   absolute evidence (search.confidence), on the same CV queries including the out-of-scope
   cases, and the budgeted threshold: the lowest out-of-scope false-positive rate that keeps
   CV Hit@5 (answered and right) within `max_hit_loss` of answering everything.

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
from scipy.optimize import minimize

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import bucket, k_folds
from lexicon.rationale import build_lexicon
from search.confidence import AbstentionModel, answer_features, features_for_mode
from search.index import SearchIndex, build_index, embedding_text
from search.learned import (LearnedExemplar, build_learned_memory, learned_cases, learned_digest, normalised_query,
                            unrelated_cosine)
from search.prefilter import LEARNED, SIGNALS, SPARSE_SIGNALS, analyse_query, rank_values, signal_values
from search.prototypes import encode, fit_prototypes
from search.ranker import MODES, FusionWeights, RankerParams
from settings import Settings, Weights

FOLDS = 5
MAX_CV_QUERIES = 3000
# Fewer out-of-scope cases than this: no abstention model (everything with evidence is answered).
# Eleven (the demo's) fitted a model whose CV promised ~1% refused in-scope queries and which
# refused 15% of the held-out ones: a dozen negatives cannot calibrate it.
MIN_OOS_CASES = 20
MAX_HIT_LOSS = 0.02
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

    def gold_rows(self) -> list[int]:
        gold = set(self.case.gold)
        return [i for i, t in enumerate(self.tasks) if t.id in gold]

    def values_for(self, mode: str) -> dict[str, np.ndarray]:
        return self.values if mode == "full" else {k: v for k, v in self.values.items() if k in SPARSE_SIGNALS}


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
    return index


def prototypes_of(index: SearchIndex) -> np.ndarray | None:
    """Softmax-regression prototypes over the index's exemplars (search.prototypes)."""
    memory = index.exemplars
    if memory.vectors is None:
        return None
    return fit_prototypes(memory.vectors, memory.task_rows, memory.n_tasks, memory.centroids)


def cv_queries(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
               folds: int = FOLDS, seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
               progress: Callable | None = None, learned: Sequence[LearnedExemplar] = (),
               learned_as_cases: bool = False) -> list[CVQuery]:
    """Signal values of the cases, each scored by an index built without its fold. With
    `max_queries`, a stable hash sample of the in-scope held-out queries plus every out-of-scope
    one is scored (each fold's index still learns from all the other folds' cases).
    `learned`: exemplars learned from use (search.learned); each fold's index has those whose
    query is not one of the fold's held-out queries, so the `learned` signal's weight is fitted
    on how well use predicts queries it has not seen. `learned_as_cases`: those exemplars also
    join the fold's cases (search.learned.learned_cases: exemplar memory and lexicon)."""
    tasks = [t for t in tasks if t.active]
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
    for fold, (fit, held) in enumerate(k_folds(list(cases), folds, seed)):
        if sampled is not None:
            held = [c for c in held if c.query in sampled]
        if not held:
            continue
        held_queries = frozenset(normalised_query(c.query) for c in held)
        if learned and learned_as_cases:
            fit = [*fit, *learned_cases(learned, held_queries)]
        index = build_index(tasks, build_lexicon(fit), settings.field_weights, cases=fit)
        if learned:
            index = index.with_learned(build_learned_memory([t.id for t in tasks], learned, held_queries))
        analysed = [analyse_query(index, c.query, settings.typo_min_similarity) for c in held]
        vectors = [None] * len(held)
        if embedder is not None:
            index = attach_vectors(index, embedder, task_vectors)
            index = index.with_prototypes(prototypes_of(index))
            vectors = list(embedder.embed([a.embedding_text for a in analysed], "query"))
        rows, visible = index.visible(None, restrict=False)
        for case, query, vector in zip(held, analysed, vectors):
            values = signal_values(index, query, rows, vector)
            oos = index.exemplars.nearest_out_of_scope(vector) if vector is not None else None
            out.append(CVQuery(case, fold, visible, values, oos))
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
    return minimize(objective, np.maximum(prior, 0.0), jac=True, method="L-BFGS-B", bounds=bounds).x


def fit_weights(queries: Sequence[CVQuery], mode: str, prior: Weights, strength: float = PRIOR_STRENGTH,
                signals: Sequence[str] | None = None) -> Weights:
    """The mode's fusion weights (see the module docstring); `prior` where there is no evidence.
    `signals` restricts the model to those signals (the evaluation's ablations); the others get 0."""
    wanted = (*SIGNALS, LEARNED) if mode == "full" else SPARSE_SIGNALS
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


def choose_shortlist(metrics: dict, default: int) -> int:
    if not metrics.get("n"):
        return default
    ceiling = metrics["hit@50"]
    return next((k for k in K_VALUES if metrics[f"hit@{k}"] >= ceiling - 0.01), max(K_VALUES))


# --- abstention ---------------------------------------------------------------------------------

L2_GRID = (0.3, 3.0, 30.0, 300.0)   # abstention model penalties tried by cross-fitting


def _logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Class-balanced, L2-regularised logistic regression on standardised features (penalty
    l2 * ||w||^2 / n); weights returned in raw units."""
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    Z = (X - mean) / scale
    balance = np.where(y == 1, 0.5 / max(y.mean(), 1e-9), 0.5 / max(1 - y.mean(), 1e-9))

    def objective(theta):
        w, b = theta[:-1], theta[-1]
        s = Z @ w + b
        p = 1.0 / (1.0 + np.exp(-s))
        loss = np.sum(balance * (np.logaddexp(0, s) - y * s)) / len(y) + l2 * w @ w / len(y)
        g = balance * (p - y) / len(y)
        return loss, np.append(Z.T @ g + 2 * l2 * w / len(y), g.sum())

    theta = minimize(objective, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B").x
    coef = theta[:-1] / scale
    return coef, float(theta[-1] - coef @ mean)


def operating_point(logits: np.ndarray, oos: np.ndarray, hit5: np.ndarray, pinned: np.ndarray, t: float) -> dict:
    answered = pinned | (logits >= t)
    ins = ~oos
    return {"threshold": float(t),
            "hit@5": float(np.mean(answered[ins] & hit5[ins])) if ins.any() else None,
            "oos_fpr": float(np.mean(answered[oos])) if oos.any() else None,
            "in_scope_abstain": float(np.mean(~answered[ins])) if ins.any() else None}


def _cross_fitted(X: np.ndarray, y: np.ndarray, folds: np.ndarray) -> tuple[float, np.ndarray]:
    """(penalty, out-of-fold logits): each fold scored by a model fitted on the others, for each
    penalty of L2_GRID; the penalty with the lowest class-balanced out-of-fold log-loss wins.
    With a dozen out-of-scope cases a weak penalty overfits them and refuses unseen in-scope
    queries; the data, not a constant, says how strong it must be."""
    best = None
    balance = np.where(y == 1, 0.5 / max(y.mean(), 1e-9), 0.5 / max(1 - y.mean(), 1e-9))
    for l2 in L2_GRID:
        logits = np.zeros(len(y))
        for fold in np.unique(folds):
            train = folds != fold
            coef, intercept = _logistic(X[train], y[train], l2)
            logits[~train] = X[~train] @ coef + intercept
        loss = float(np.sum(balance * (np.logaddexp(0, logits) - y * logits)) / len(y))
        if best is None or loss < best[0]:
            best = (loss, l2, logits)
    return best[1], best[2]


def cross_fitted_rankings(queries: Sequence[CVQuery], prior: FusionWeights, mode: str, depth: int = 5):
    """Each fold's queries ranked with fusion weights fitted on the OTHER folds only. Ranked with
    weights fitted on themselves, the CV queries look more certain (larger margins, higher top
    probabilities) than unseen queries will, and an abstention model learnt on them refuses
    too many real queries later."""
    folds = np.array([q.fold for q in queries])
    out: list = [None] * len(queries)
    for fold in np.unique(folds):
        others = [q for q, f in zip(queries, folds) if f != fold]
        weights = FusionWeights(*(fit_weights(others, m, prior.for_mode(m)) if m == mode else prior.for_mode(m)
                                  for m in MODES))
        mine = [i for i, f in enumerate(folds) if f == fold]
        for i, result in zip(mine, rankings([queries[i] for i in mine], weights, mode, depth)):
            out[i] = result
    return out


def fit_abstention(queries: Sequence[CVQuery], weights: FusionWeights, mode: str,
                   max_hit_loss: float = MAX_HIT_LOSS) -> AbstentionModel | None:
    """Logistic model + budgeted threshold (module docstring). Everything it learns from is
    cross-fitted: the rankings (fusion weights fitted without the query's fold, starting from
    `weights`) and the logits the threshold is chosen on (abstention model fitted without the
    fold), so the in-scope loss it budgets is the one unseen queries will see."""
    results = cross_fitted_rankings(queries, weights, mode)
    oos = np.array([not q.case.gold for q in queries])
    if oos.sum() < MIN_OOS_CASES or (~oos).sum() < MIN_OOS_CASES:
        return None
    names = features_for_mode(mode)
    X = np.array([[answer_features(r).get(n, 0.0) for n in names] for r in results], dtype=np.float64)
    y = (~oos).astype(np.float64)
    hit5 = np.array([bool(set(q.case.gold) & {i.task.id for i in r.ranked[:5]}) for q, r in zip(queries, results)])
    folds = np.array([q.fold for q in queries])
    if any(y[folds != fold].min() == y[folds != fold].max() for fold in np.unique(folds)):
        return None   # a fold without one of the classes: no honest cross-fitted score
    l2, logits = _cross_fitted(X, y, folds)
    coef, intercept = _logistic(X, y, l2)
    pinned = np.zeros(len(queries), dtype=bool)
    base = float(np.mean(hit5[~oos]))
    values = np.unique(logits)
    candidates = np.concatenate([[values[0] - 1e-6], (values[1:] + values[:-1]) / 2])
    best = None
    for t in candidates:
        point = operating_point(logits, oos, hit5, pinned, t)
        if point["hit@5"] < base - max_hit_loss - 1e-12:
            continue
        key = (-point["oos_fpr"], point["hit@5"], -t)
        if best is None or key > best[0]:
            best = (key, point)
    point = dict(best[1], hit5_answer_all=round(base, 4), n_in_scope=int((~oos).sum()), n_oos=int(oos.sum()),
                 cross_fitted=True, l2=l2)
    return AbstentionModel(tuple(names), tuple(round(float(c), 6) for c in coef), round(intercept, 6),
                           round(point["threshold"], 6), point)


# --- the whole fit ------------------------------------------------------------------------------

def usable_learned(learned: Sequence[LearnedExemplar], blocked: frozenset[tuple[str, str]],
                   tasks: Sequence[TaskRecord]) -> tuple[LearnedExemplar, ...]:
    """The learned exemplars the fit may use: not blocked by the admin, on an active task."""
    active = {t.id for t in tasks if t.active}
    return tuple(e for e in learned if (e.query, e.task_id) not in blocked and e.task_id in active)


def choose_learned_as_cases(settings: Settings, tasks, cases, embedder, seed: int, max_queries: int | None,
                            learned: Sequence[LearnedExemplar], defaults: RankerParams,
                            queries: Sequence[CVQuery], weights: FusionWeights, report: dict, mode: str = "full"
                            ) -> tuple[Sequence[CVQuery], FusionWeights, bool]:
    """Whether the learned exemplars should also join the exemplar memory and lexicon
    (search.learned.learned_cases), decided by the same CV: the written cases' held-out folds
    are scored by indexes with and without them (each fold without its own queries) and the
    weights fitted on each; the learned exemplars become cases only when that raises the CV
    Hit@1 (then MRR) of `mode` (the fit's primary mode: full, or sparse without embeddings).
    A catalog where use does not generalise keeps the `learned` signal alone (or nothing).
    Returns (queries, weights, as_cases); the report's cv[mode] gets `fitted_learned_as_cases`."""
    alternative = cv_queries(settings, tasks, cases, embedder, FOLDS, seed, max_queries, None, learned,
                             learned_as_cases=True)
    modes = list(report["cv"])
    candidate = FusionWeights(fit_weights(alternative, "full", defaults.weights.full) if "full" in modes
                              else weights.full, fit_weights(alternative, "sparse", defaults.weights.sparse))
    with_cases = ranking_metrics(alternative, rankings(alternative, candidate, mode))
    report["cv"][mode]["fitted_learned_as_cases"] = with_cases
    current = report["cv"][mode]["fitted"]
    if (with_cases["hit@1"], with_cases["mrr"]) > (current["hit@1"], current["mrr"]):
        for m in modes:   # a degraded server holds the same exemplars (the sparse exemplar document)
            before = report["cv"][m]["fitted"]
            report["cv"][m].update(defaults=ranking_metrics(alternative, rankings(alternative, defaults.weights, m)),
                                   fitted=ranking_metrics(alternative, rankings(alternative, candidate, m)))
            report["cv"][m]["fitted_learned_signal_only" if m == "full" else "fitted_without_learned"] = before
        return alternative, candidate, True
    return queries, weights, False


def fit_ranker(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
               defaults: RankerParams, seed: int = 42, max_queries: int | None = MAX_CV_QUERIES,
               progress: Callable | None = None, queries: Sequence[CVQuery] | None = None,
               learned: Sequence[LearnedExemplar] = (),
               blocked: frozenset[tuple[str, str]] = frozenset()) -> tuple[RankerParams, dict]:
    """Fit every parameter on CV inside `cases`; returns (params, report). With fewer than
    settings.fit_min_cases in-scope cases the defaults are returned (and the report says so).
    `queries`: the CV queries of these cases, when the caller has them already.
    `learned`: exemplars learned from use (search.learned.eligible), minus the `blocked`
    (query, task) pairs; the CV decides whether they feed the `learned` signal (dense: with
    embeddings only) and whether they join the exemplar memory (choose_learned_as_cases)."""
    started = time.perf_counter()
    tasks = [t for t in tasks if t.active]
    learned = usable_learned(learned, blocked, tasks)   # without embeddings: only as cases (the signal is dense)
    in_scope = [c for c in cases if c.gold]
    report: dict = {"n_cases": len(cases), "n_in_scope": len(in_scope), "n_out_of_scope": len(cases) - len(in_scope),
                    "folds": FOLDS, "seed": seed, "digest": cases_digest(tasks, cases)}
    if len(in_scope) < settings.fit_min_cases:
        report["status"] = f"defaults: fewer than {settings.fit_min_cases} in-scope test cases"
        return defaults, report
    if queries is None:
        queries = cv_queries(settings, tasks, cases, embedder, FOLDS, seed, max_queries, progress, learned)
    modes = [m for m in MODES if m == "sparse" or embedder is not None]
    fitted = {m: fit_weights(queries, m, defaults.weights.for_mode(m)) for m in modes}
    weights = FusionWeights(fitted.get("full", defaults.weights.full), fitted["sparse"])
    report["cv"] = {}
    for mode in modes:
        before = ranking_metrics(queries, rankings(queries, defaults.weights, mode))
        after = ranking_metrics(queries, rankings(queries, weights, mode))
        report["cv"][mode] = {"defaults": before, "fitted": after}
        if learned and mode == "full":
            report["cv"][mode]["fitted_without_learned"] = ranking_metrics(
                queries, rankings(queries, FusionWeights(replace(weights.full, learned=0.0), weights.sparse), mode))
    as_cases = False
    primary = "full" if "full" in modes else "sparse"
    if learned:
        queries, weights, as_cases = choose_learned_as_cases(settings, tasks, cases, embedder, seed, max_queries,
                                                             learned, defaults, queries, weights, report, primary)
    shortlist = choose_shortlist(report["cv"][primary]["fitted"], defaults.shortlist_size)
    abstention = {m: fit_abstention(queries, defaults.weights, m) for m in modes}
    abstention.setdefault("full", None)
    stored_prototypes = None
    if embedder is not None:
        index_cases = [*cases, *learned_cases(learned)] if as_cases else cases   # the exemplars serving will hold
        index = attach_vectors(build_index(tasks, build_lexicon(index_cases), settings.field_weights,
                                           cases=index_cases), embedder)
        matrix = prototypes_of(index)
        if matrix is not None:
            stored_prototypes = {"task_ids": [t.id for t in index.tasks], "matrix": encode(matrix)}
    used = (embedder is not None and weights.full.learned > 0) or as_cases
    params = RankerParams(weights, shortlist, abstention, "fit", None, stored_prototypes,
                          learned=tuple(learned) if used else (), learned_as_cases=as_cases)
    if learned:
        report["learned"] = {"pairs": len(learned), "digest": learned_digest(learned),
                             "weight": weights.full.learned if embedder is not None else None,
                             "as_cases": as_cases, "used": used}
    report.update(status="fitted", n_cv_queries=len(queries), shortlist_size=shortlist,
                  abstention={m: (a.cv if a else None) for m, a in abstention.items()},
                  seconds=round(time.perf_counter() - started, 2))
    return params, report

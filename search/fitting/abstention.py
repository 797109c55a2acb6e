"""Abstention: whether the top answer is a confident match, fitted per catalog and mode
(search.confidence decides with it).

Score: with at least MIN_NEGATIVES negatives (written out-of-scope cases, the generic off-topic
memory, unclicked queries: `abstention_negatives`), a weighted, L2-regularised logistic regression
of "in scope" on the top answer's absolute evidence (search.confidence.answer_features), each
class weighing half and each source of negatives the same (`class_balance`), its penalty chosen
on cross-fitted log-loss (`_cross_fitted`); with fewer, the one-class evidence alone. Threshold:
split-conformal (Vovk et al. 2005, "Algorithmic learning in a random world"; Angelopoulos & Bates
2021, "A gentle introduction to conformal prediction") on the in-scope cases' out-of-fold scores,
so that at most the budget of answerable queries is refused (`conformal_threshold`), and one per
typing class on the typed prefixes (search.fitting.typed). `fit_abstentions` fits one model per
mode, on the calibration queries (search.fitting.calibration).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord
from lexicon.rationale import pin_key
from search.confidence import ONE_CLASS_FEATURE, AbstentionModel, answer_features, features_for_mode
from search.fitting.calibration import calibration_queries
from search.fitting.cv import CVPass, CVQuery, FitContext
from search.fitting.metrics import cross_fitted_rankings
from search.fitting.weights import typing_signals
from search.offtopic import load_offtopic
from search.prefilter import TYPING_SIGNALS
from search.ranker import FusionWeights
from search.typed import TYPED_WHOLE
from settings import Settings

# Abstention (fit_abstention): the default in-scope budget (settings.abstain_budget), the fewest
# negatives for a discriminative score (fewer: the one-class evidence alone), and the fewest
# in-scope CV queries to calibrate a threshold on. Negatives only shape the score; the threshold
# is set on in-scope cases alone, so a dozen negatives can no longer make it refuse more than
# the budget (they did, when they set the threshold: 15% of the demo's held-out queries).
DEFAULT_BUDGET = 0.05
MIN_NEGATIVES = 20
MIN_IN_SCOPE = 20


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


def abstention_negatives(settings: Settings, cases: Sequence[CaseRecord], unclicked: Sequence[str] = ()
                         ) -> list[tuple[str, str]]:
    """The negatives a fit scores beside the written out-of-scope cases: the shipped generic
    off-topic memory (unless ABSTAIN_OFFTOPIC=0) and `unclicked`, queries that repeatedly ended
    without a click (supplied by the learning-from-use aggregates)."""
    return negative_evidence(cases, load_offtopic() if settings.abstain_offtopic else (), unclicked)


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


def _rate(mask: np.ndarray, answered: np.ndarray) -> float | None:
    return round(float(np.mean(answered[mask])), 4) if mask.any() else None


def feature_matrix(results, names: Sequence[str]) -> np.ndarray:
    """(results x names): each result's abstention features (search.confidence.answer_features,
    read once per result: it was computed again for each feature name, 77,600 times in a demo
    fit), 0 where a result has none of that name."""
    rows = (answer_features(result) for result in results)
    return np.array([[features.get(name, 0.0) for name in names] for features in rows], dtype=np.float64)


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
    X = feature_matrix(results, names)
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
        # cross-fitted; the model is not, but no prefix is among what it was fitted on): those read
        # as still typed ranked with the typing weights, the whole-reading ones (TYPED_WHOLE) as
        # whole queries are
        typing = [q for q in typing if q.unfinished] + [q for q in typing if not q.unfinished]
        short = sum(1 for q in typing if q.unfinished)
        typed = (cross_fitted_rankings(typing[:short], typing_weights, mode, signals=typing_signals(signals),
                                       extra=TYPING_SIGNALS) if short else [])
        typed += cross_fitted_rankings(typing[short:], weights, mode, signals=signals) if short < len(typing) else []
        features = feature_matrix(typed, names)
        typed_logits = features @ np.asarray(coef, dtype=np.float64) + intercept
        classes = np.array([q.judged_as for q in typing])
        pooled = conformal_threshold(typed_logits[classes != TYPED_WHOLE], budget) if short else threshold
        # one threshold per typing class (search.typed.TYPING_CLASSES), the pooled one where a
        # class has too few prefixes to set its own (fewer than 1 / budget); then TYPED_WHOLE's,
        # the whole query's where it has too few
        enough = np.ceil(1.0 / max(budget, 1e-9))
        thresholds = tuple(conformal_threshold(typed_logits[classes == c], budget) if (classes == c).sum() >= enough
                           else pooled for c in range(1, TYPED_WHOLE))
        thresholds += (conformal_threshold(typed_logits[classes == TYPED_WHOLE], budget)
                       if (classes == TYPED_WHOLE).sum() >= enough else threshold,)
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


def fit_abstentions(context: FitContext, queries: Sequence[CVQuery], cv: CVPass, prior: FusionWeights,
                    signals: dict[str, Sequence[str] | None], typing: Sequence[CVQuery] = (),
                    typing_weights: FusionWeights | None = None, foreign: tuple | None = None,
                    foreign_out: dict | None = None) -> dict[str, AbstentionModel | None]:
    """{mode: abstention model} of a fit, for each of the context's modes (fit_abstention), on the
    calibration queries (calibration_queries: the fit's CV `queries`, or the cases scored again
    with the runs they were written in kept in one fold; `cv`: the pass `queries` were scored
    with); each model's `cv` says which (`calibration`). `foreign`: (weights, signals, the CV
    queries of cases written in another language) of a query in another language than the
    catalog's (search.fitting.foreign); its full-mode model, fitted on the same calibration
    queries as such a query would have them and those cases, goes into `foreign_out`."""
    calibration, how = calibration_queries(context, queries, cv)
    out: dict[str, AbstentionModel | None] = {"full": None}
    for mode in context.modes:
        model = fit_abstention(calibration, prior, mode, context.settings.abstain_budget, signals.get(mode), typing,
                               typing_weights)
        out[mode] = replace(model, cv={**model.cv, "calibration": how}) if model is not None else None
    if foreign is not None and foreign_out is not None and "full" in context.modes:
        from search.fitting.foreign import as_foreign   # (imports this module)
        weights, kept, other_language = foreign
        # the catalog's own cases in other languages beside them; its prefixes too (one threshold per
        # typing class), ranked as such a query is: with the foreign weights
        model = fit_abstention([*(as_foreign(q) for q in calibration), *other_language], weights, "full",
                               context.settings.abstain_budget, kept, [as_foreign(q) for q in typing],
                               weights if typing else None)
        foreign_out["full"] = replace(model, cv={**model.cv, "calibration": how}) if model is not None else None
    return out

"""Fusion weights: a conditional-logit model (McFadden 1974, "Conditional logit analysis of
qualitative choice behavior"; listwise softmax learning to rank, Cao et al. 2007, "Learning to
rank: from pairwise approach to listwise approach"),

    p(t | q) = exp(w . x(q, t)) / sum_u exp(w . x(q, u)),   maximise sum_q log p(gold | q)

over the CV queries' signals (search.fitting.cv) scaled to unit spread, with an L2 penalty that
pulls w towards the shipped defaults (a Gaussian prior centred on them: a catalog with few cases
stays close to the defaults, one with many moves as far as its evidence says) and w >= 0,
solved by L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995). `typing_signals`: the signals a fit on typed
prefixes adds to a mode's own (search.fitting.typed).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Sequence

import numpy as np

from search.fitting.cv import CVQuery
from search.prefilter import LEARNED, SIGNALS, SPARSE_SIGNALS, TYPING_SIGNALS
from settings import Weights

PRIOR_STRENGTH = 1.0         # L2 pull towards the defaults, in standardised units, per CV query mean
CANDIDATES = 100             # per query, the softmax of the fit runs over gold + this many best tasks


def design_matrices(queries: Sequence[CVQuery], names: Sequence[str], prior: Weights
                    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per in-scope query, its (candidates x signals) matrix and gold mask; candidates are the
    gold tasks plus the CANDIDATES best by the prior weights (all tasks in a small catalog).
    Each query's are computed once per (names, prior) and kept with it (CVQuery.designs)."""
    matrices, golds = [], []
    prior_w = np.array([getattr(prior, n) for n in names])
    key = (tuple(names), prior_w.tobytes())
    for q in queries:
        design = q.designs.get(key)
        if design is None:
            design = q.designs[key] = _design(q, names, prior_w)
        if design is not None:
            matrices.append(design[0])
            golds.append(design[1])
    return matrices, golds


def _design(q: CVQuery, names: Sequence[str], prior_w: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """design_matrices' (matrix, gold mask) of one query, None for one without gold. The arrays
    are shared by every fit that asks: read only."""
    gold = q.gold_rows()
    if not gold:
        return None
    X = np.stack([q.values[n] for n in names], axis=1).astype(np.float64)
    is_gold = np.zeros(X.shape[0], dtype=bool)
    is_gold[gold] = True
    if X.shape[0] > CANDIDATES + len(gold):
        best = np.argpartition(-(X @ prior_w), CANDIDATES)[:CANDIDATES]
        keep = np.union1d(best, gold)
        mask = is_gold[keep]
        X = X[keep]
    else:
        mask = is_gold
    X.flags.writeable = mask.flags.writeable = False
    return X, mask


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


def typing_signals(signals: Sequence[str] | None) -> Sequence[str] | None:
    """The signals of a fit on typed prefixes: `signals` and TYPING_SIGNALS (None: all of them)."""
    return None if signals is None else (*signals, *TYPING_SIGNALS)

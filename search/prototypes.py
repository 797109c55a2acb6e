"""Discriminative task prototypes: a softmax regression over the exemplar embeddings.

The centroid signal compares a query with the mean of each task's exemplars; it ignores what
the OTHER tasks' exemplars look like, so two neighbouring tasks ("transfer" and "balance") blur
into each other. A multinomial logistic regression (softmax regression) over the same exemplar
vectors learns one weight vector per task that separates it from its neighbours:

    p(t | q) = exp(w_t . v_q) / sum_u exp(w_u . v_q)
    W = argmin  -1/n sum_i log p(t_i | v_i)  +  lambda ||W||^2

started from the scaled centroids (w_t = T c_t) so that a task with no test case keeps its
centroid direction (its name and aliases). The `prototype` signal is the logit w_t . v_q.
On CLINC150 (100 requests per intent, e5-small) this alone reaches val Hit@1 0.964 against the
centroid's 0.927.

Fitted off the request path, with the rest of the ranker (search.fitting), and stored with the
fit as float16; a query then costs one (tasks x dim) matrix-vector product, like the centroid.
"""
from __future__ import annotations

import base64
import hashlib

import numpy as np

from search.lru import LRU

L2 = 1e-6
INIT_SCALE = 20.0
MAX_ITER = 200
# L-BFGS-B's memory (scipy's `maxcor`, 10 by default): the corrections it keeps to approximate
# the inverse Hessian. Its own routine costs O(maxcor x tasks x dim) a step; on a catalog of the
# demo's size that is most of this fit's time: with 10, 0.49 of a fold's 0.77 CPU s, 0.26 s in
# the objective (200 tasks x 384 dims = 76,800 variables; AMD EPYC Zen 4, one BLAS thread).
# With 5: 0.50 s in all, the same stopping rule; held-out figures the same within 0.002 but one
# seed's OOS FPR (demo 20%; CLINC150 few-shot seeds 1-3: docs/design/performance.md, "The
# prototype fit's memory"). A two-loop L-BFGS in numpy took 0.43-0.58 s: the library stays.
MEMORY = 5
# Fitting costs ~ exemplars x tasks x dim per iteration: past this budget of exemplars x tasks
# (e.g. 2,000 tasks x 50,000 exemplars) the prototype signal is not fitted (the centroid and
# nearest-neighbour signals still are), so that a background fit stays within minutes.
MAX_WORK = 100_000_000

# fit_prototypes is a pure function of its inputs and its L-BFGS fit is a large part of a ranker
# fit's time (the demo: 3.3 of ~7.7 CPU s, six fits: one per CV fold and the final one). A
# process refits on the same folds again and again (a background refit after an edit that leaves
# a fold's training cases alone, the evaluation's fits, the test suite's), so results are
# memoised by a digest of the inputs: a hit returns the very matrix the fit would compute. 16
# entries of 200 x 384 float32 are 5 MB.
_MEMO: LRU[np.ndarray] = LRU(16)


def _inputs_digest(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(np.ascontiguousarray(part).tobytes() if isinstance(part, np.ndarray) else repr(part).encode())
        digest.update(b"|")
    return digest.hexdigest()


def fit_prototypes(vectors: np.ndarray, task_rows: np.ndarray, n_tasks: int, centroids: np.ndarray,
                   l2: float = L2, max_iter: int = MAX_ITER) -> np.ndarray | None:
    """(tasks x dim) prototype matrix, or None when the budget (MAX_WORK) is exceeded or there
    is nothing to separate (fewer than two tasks with exemplars)."""
    n, dim = vectors.shape
    if n * n_tasks > MAX_WORK or len(np.unique(task_rows)) < 2:
        return None
    X = vectors.astype(np.float32)
    Y = np.zeros((n, n_tasks), dtype=np.float32)
    Y[np.arange(n), task_rows] = 1.0

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        W = flat.reshape(n_tasks, dim).astype(np.float32)
        S = X @ W.T
        S -= S.max(axis=1, keepdims=True)
        P = np.exp(S)
        P /= P.sum(axis=1, keepdims=True)
        loss = -float(np.log(P[np.arange(n), task_rows] + 1e-12).mean()) + l2 * float((W * W).sum())
        grad = (P - Y).T @ X / n + 2 * l2 * W
        return loss, grad.astype(np.float64).ravel()

    start = (INIT_SCALE * centroids).astype(np.float64).ravel()
    key = _inputs_digest(X, np.asarray(task_rows), n_tasks, start, l2, max_iter, MEMORY)
    known = _MEMO.get(key)
    if known is not None:
        return known.copy()
    from scipy.optimize import minimize  # lazy: 0.3 s of imports a search never needs

    result = minimize(objective, start, jac=True, method="L-BFGS-B",
                      options={"maxiter": max_iter, "maxcor": MEMORY})
    prototypes = result.x.reshape(n_tasks, dim).astype(np.float32)
    _MEMO.put(key, prototypes.copy())
    return prototypes


def encode(matrix: np.ndarray) -> str:
    """float16, base64: compact enough to store with a fit (150 tasks x 384 dims: 115 kB)."""
    return base64.b64encode(matrix.astype(np.float16).tobytes()).decode("ascii")


def decode(text: str, n_tasks: int) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(text), dtype=np.float16)
    return raw.reshape(n_tasks, -1).astype(np.float32)

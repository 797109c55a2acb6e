"""The abstention's calibration queries: the cases scored again with each run of cases written
together in one fold, so that its threshold is set on held-out cases as unlike their fold's memory
as a new author's query will be.

Blocked cross-validation (Roberts et al. 2017, "Cross-validation strategies for data with
temporal, spatial, hierarchical, or phylogenetic structure", Ecography 40), the dependence
measured on the suite itself (`written_together_range`: the first lag d at which consecutive
cases of one task are no longer more alike, by term Jaccard, than cases farther apart, a
one-sided test at DEPENDENCE_Z standard errors), blocks as long as the folds allow
(`calibration_blocks`), each block hashed to a fold (`written_together_folds`). Why, and what it
changed on CLINC150: the comment above MAX_DEPENDENCE_LAG and docs/abstention.md.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
from scipy import sparse

from catalog.records import CaseRecord
from catalog.splits import bucket, hash_folds
from lexicon.text import terms
from search.fitting.cv import FOLDS, CVPass, CVQuery, FitContext, cv_queries

# The abstention's threshold is a tail quantile of the in-scope cases' CV scores: it is set on
# every in-scope case up to this many (calibration_queries), not on the weight fit's sample of
# MAX_CV_QUERIES. At a 5% budget the refusal rate a 3,000 sample promises has a standard error of
# 0.4 points, at 15,000 of 0.18 (CLINC150 full, no written negatives: val refusals 5.7% with the
# sample, 5.2% with all 15,000; docs/abstention.md). The cost: that fit takes 95 -> 128-145 s.
MAX_CALIBRATION_QUERIES = 20_000


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
    assignment = hash_folds(cases, folds, seed)
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


def calibration_folds(cases: Sequence[CaseRecord], seed: int) -> tuple[dict, list[int] | None]:
    """(report, assignment): the calibration's folds. Where the suite was written in runs
    (calibration_blocks: blocks of at least 2), each case's block fold (written_together_folds)
    and {"folds": "blocked", "written_together": range, "block": length}; otherwise None (the
    hash folds of catalog.splits.k_folds) and {"folds": "hash", "written_together": range}."""
    written, length = calibration_blocks(cases)
    if length <= 1:
        return {"folds": "hash", "written_together": written}, None
    return ({"folds": "blocked", "written_together": written, "block": length},
            written_together_folds(cases, FOLDS, seed, length))


def calibration_queries(context: FitContext, queries: Sequence[CVQuery], cv: CVPass = CVPass(),
                        max_calibration: int | None = MAX_CALIBRATION_QUERIES) -> tuple[Sequence[CVQuery], dict]:
    """(CV queries, report): those the abstention is fitted and calibrated on. Where the suite's
    cases were written in runs (written_together_range > 1), the cases scored again with each run
    in one fold (calibration_folds), so that no held-out case has its run-mates in memory;
    otherwise the fit's hash-fold CV `queries` (scored for `context.max_queries`). A block is the
    median task's cases / FOLDS long, as long as the folds allow (hash folds where that is under 2).
    Either way up to `max_calibration` in-scope cases are scored (MAX_CALIBRATION_QUERIES): where
    the fit's CV sampled fewer, the hash folds are scored again for more. `cv`: the pass `queries`
    were scored with (its negatives and learned exemplars, cv_queries)."""
    how, assignment = calibration_folds(context.cases, context.seed)
    max_queries = context.max_queries
    # more than the fit's CV scored: it sampled, and the calibration may take more
    more = (max_queries is not None and len(context.cases) > max_queries
            and (max_calibration is None or max_calibration > max_queries))
    wider = context.sample(max_calibration if more else max_queries)
    if assignment is None:
        if not more:
            return queries, how
        return cv_queries(wider, cv), how
    return cv_queries(wider, replace(cv, assignment=assignment)), how

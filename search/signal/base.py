"""What a ranking signal is (`Signal`) and what the signals of one query share (`QueryContext`).

A signal x_f(q, t) gives every visible task t one value for the query q; the prefilter fuses
them, score(q, t) = sum_f w_f * x_f(q, t) (search.prefilter). Each signal is one module of this
package, holding all that is particular to it: where its evidence comes from, its query-time
value, its index-time preparation (when it needs one the shared index does not hold), whether
it is sparse evidence for the abstention, its single-signal evaluation baseline and the phrase
the widget's "why" line uses for it. search/signal/__init__.py registers them, in one list.
The default weights are configuration: settings.Weights and settings.DegradedWeights.

The shared, precomputed parts (the BM25F and rationale matrices, the exemplar memory, the
vectors) live in the index (search.index, search.exemplars); `QueryContext` computes what
several signals of one query read (the query plan, the projections of the query vector, the
centroid cosines the neighbour cascade starts from) once, on first use.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from search.signals import column_sum

if TYPE_CHECKING:
    from catalog.records import CaseRecord, TaskRecord
    from search.index import SearchIndex
    from search.prefilter import AnalysedQuery, QueryPlan

#: The families, in the order the prefilter computes them. `sparse`: from words (always there);
#: `typing`: only for a query read as still being typed; `dense`: from the query vector (full
#: mode only); `learned`: from use, only with a fit that weighed it (full mode only).
FAMILIES = ("sparse", "typing", "dense", "learned")


@dataclass(frozen=True)
class Signal:
    name: str                  # the weight's field in settings.Weights, the key in responses
    family: str                # one of FAMILIES
    source: str                # what its evidence is, for the configuration reference (docs)
    value: Callable[["QueryContext"], np.ndarray | None]   # x_f at ctx.rows; None: unavailable here
    says: str | None = None    # the "why" line's phrase when it added to a result's score; None: unnamed
    abstention_evidence: bool = False   # sparse evidence that a query word points at a task (search.confidence)
    baseline: str | None = None         # description of its single-signal evaluation baseline (evaluation.configs)
    fit_only: bool = False     # exists only with a per-catalog fit (no shipped default weight is derived)
    # index-time preparation the shared index does not hold: prepare(tasks, cases, index) -> data,
    # kept as index.prepared[name] (search.index.build_index calls it once per index; the value
    # function reads ctx.index.prepared[name])
    prepare: Callable[[Sequence["TaskRecord"], Sequence["CaseRecord"], "SearchIndex"], Any] | None = None


def _prefilter():
    """search.prefilter, which imports this package (so not at the top of this module): by then
    it is loaded, and a look-up in sys.modules costs a tenth of a `from ... import` statement
    (0.8 µs), twice per query."""
    return sys.modules["search.prefilter"]


class lazy:
    """An attribute computed on first use and then kept in the instance (functools.cached_property
    without its lock: Python 3.11's takes one RLock shared by every instance of the class on each
    first use, 4 per query here; a query's context is never shared between threads, and 3.12
    dropped the lock for the same reason)."""

    def __init__(self, compute: Callable):
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class QueryContext:
    """One query against one index, for the tasks at `rows`: the inputs of every signal, and the
    parts several of them read, each computed once on first use."""

    def __init__(self, index: "SearchIndex", analysed: "AnalysedQuery", rows: np.ndarray,
                 query_vector: np.ndarray | None):
        self.index = index
        self.analysed = analysed
        self.rows = rows
        self.query_vector = query_vector

    @lazy
    def plan(self) -> "QueryPlan":
        """How each query word meets the index (search.prefilter.plan_query)."""
        a = self.analysed
        return _prefilter().plan_query(self.index, a.words, a.corrections, a.prefix, a.language)

    def exact(self, matrix) -> np.ndarray:
        """Column sums of the query's own terms, plus the last word's weighted completions
        (every task; the sparse signals normalise, then take `rows`)."""
        plan = self.plan
        scores = column_sum(matrix, plan.columns)
        if plan.prefix_columns:
            scores = scores + column_sum(matrix, list(plan.prefix_columns), list(plan.prefix_columns.values()))
        return scores

    @lazy
    def _whole(self) -> bool:
        return self.rows.size * 3 >= len(self.index.tasks)   # most tasks visible: multiply, then pick (no copy)

    def project(self, matrix: np.ndarray) -> np.ndarray:
        """matrix @ query vector at `rows`."""
        if self._whole:
            return (matrix @ self.query_vector)[self.rows]
        return matrix[self.rows] @ self.query_vector

    @lazy
    def centroid(self) -> np.ndarray:
        return self.project(self.index.exemplars.centroids)

    @lazy
    def neighbours(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(nearest-exemplar cosine, the same over the written cases' exemplars or None): see
        search.prefilter.neighbour_signals."""
        return _prefilter().neighbour_signals(self.index.exemplars, self.rows, self.centroid, self.query_vector,
                                 written=self.index.written is not None)

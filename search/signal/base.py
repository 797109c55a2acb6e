"""What a ranking signal is (`Signal`) and what the signals of one query share (`QueryContext`).

A signal x_f(q, t) gives every visible task t one value for the query q; the prefilter fuses
them, score(q, t) = sum_f w_f * x_f(q, t) (search.prefilter). Each signal is one module of this
package, holding all that is particular to it: where its evidence comes from, its query-time
value, what it tells the abstention ("no confident match": `abstention_evidence`,
`abstention_features`, `evidence`), how it is computed where its weight is 0 (`deferred`) or
from the trusted evidence alone (`trusted`), its single-signal evaluation baseline and the
phrase the widget's "why" line uses for it. search/signal/__init__.py registers them, in one
list. The default weights are configuration: settings.Weights and settings.DegradedWeights.

The shared, precomputed parts (the BM25F and rationale matrices, the exemplar memory, the
vectors) live in the index (search.index, search.exemplars); `QueryContext` computes what
several signals of one query read (the query plan, search.query.plan_query; the projections of
the query vector; the centroid cosines the neighbour cascade starts from,
search.exemplars.neighbour_signals) once, on first use. Everything this package reads sits
below it: nothing here imports the prefilter, which imports this package.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

import numpy as np

from search.exemplars import neighbour_signals
from search.query import plan_query
from search.signals import column_sum

if TYPE_CHECKING:
    from search.index import SearchIndex
    from search.query import AnalysedQuery, QueryPlan

#: The families, in the order the prefilter computes them. `sparse`: from words (always there);
#: `typing`: only for a query read as still being typed; `dense`: from the query vector (full
#: mode only); `learned`: from use, only with a fit that weighed it (full mode only).
FAMILIES = ("sparse", "typing", "dense", "learned")


#: The abstention model's modes (search.confidence): "full" with embeddings, "sparse" without.
MODES = ("full", "sparse")


class Ranking(Protocol):
    """What an abstention feature reads of a ranking beside its top answer's signal values
    (search.prefilter.PrefilterResult, which imports this package)."""

    evidence: Mapping[str, float]              # each signal's Evidence at the top answer, and the query's
    out_of_scope_similarity: float | None      # cosine to the nearest written out-of-scope case


@dataclass(frozen=True)
class AbstentionFeature:
    """One feature of the abstention model ("no confident match", search.confidence) that a
    signal informs, read at the top answer. `value(signals, ranking)`: from the top answer's
    signal values (an unavailable one read as 0) and the ranking (`Ranking`: its `evidence`,
    its out-of-scope similarity); None: the signal's own value there. Several signals may
    inform one feature: its value is then their sum, in registry order (`sparse_evidence`).
    The fitted models store their coefficients by feature name (AbstentionModel.features), so
    a feature keeps its name once a fit has read it."""

    name: str
    modes: tuple[str, ...]     # the modes (MODES) whose model reads it
    value: Callable[[Mapping[str, float], Ranking], float] | None = None


@dataclass(frozen=True)
class Evidence:
    """A per-task array a signal keeps beside its value for its abstention features (never
    fused, never shown): the prefilter computes it where the signal has a value, and the
    abstention reads it at the top answer (PrefilterResult.evidence[name])."""

    name: str
    value: Callable[["QueryContext"], np.ndarray | None]   # at ctx.rows; None: none here


@dataclass(frozen=True)
class Signal:
    """One ranking signal: its name, family and value, and what the rest of the product reads
    of it (the module docstring)."""

    name: str                  # the weight's field in settings.Weights, the key in responses
    family: str                # one of FAMILIES
    source: str                # what its evidence is, for the configuration reference (docs)
    value: Callable[["QueryContext"], np.ndarray | None]   # x_f at ctx.rows; None: unavailable here
    says: str | None = None    # the "why" line's phrase when it added to a result's score; None: unnamed
    # a query word points at a task where it is not 0: without embeddings, a query whose top
    # answer no such signal supports is refused (search.confidence.assess)
    abstention_evidence: bool = False
    abstention_features: tuple[AbstentionFeature, ...] = ()   # what the abstention model reads of it
    evidence: tuple[Evidence, ...] = ()                        # per-task arrays its features read
    baseline: str | None = None         # description of its single-signal evaluation baseline (evaluation.configs)
    fit_only: bool = False     # exists only with a per-catalog fit (no shipped default weight is derived)
    # Where its weight is 0 it cannot move the ranking: deferred(ctx) gives its values at chosen
    # positions of ctx.rows only (positions -> values, the same as `value` there; None: unavailable),
    # and the prefilter computes it at the returned tasks alone (search.prefilter.DEFERRABLE).
    deferred: Callable[["QueryContext"], Callable[[np.ndarray], np.ndarray] | None] | None = None
    # Its value as the trusted evidence alone gives it (the written cases, what verified people
    # taught), where the index's trusted counterpart cannot say (search.prefilter.trusted_values):
    # trusted(ctx) at ctx.rows, None where nothing anonymous stands behind it.
    trusted: Callable[["QueryContext"], np.ndarray | None] | None = None


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
        """How each query word meets the index (search.query.plan_query)."""
        a = self.analysed
        return plan_query(self.index, a.words, a.corrections, a.prefix, a.language)

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
        search.exemplars.neighbour_signals."""
        return neighbour_signals(self.index.exemplars, self.rows, self.centroid, self.query_vector,
                                 written=self.index.written is not None)

"""rationale: the rationale lexicon's links from the query's terms to each task, weighted
P(t|w)·idf(w) (the paper's Eq. 1; search.signals.rationale_weight), coverage-normalised.

Index time: the lexicon matrix `index.rationale` (search.index.build_index, from
lexicon.rationale: the words of each test case's query and rationale, linked to its gold)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal
from search.signals import coverage_normalise


def scores(index, plan, exact) -> np.ndarray:
    return coverage_normalise(exact(index.rationale), plan.rationale_ideal)


def value(ctx: QueryContext) -> np.ndarray:
    return scores(ctx.index, ctx.plan, ctx.exact)[ctx.rows]


SIGNAL = Signal("rationale", "sparse", "the rationale lexicon built from test cases, weighted P(t|w)·idf(w)", value,
                says="uses words its example searches use", abstention_evidence=True,
                abstention_features=(AbstentionFeature("rationale", ("sparse",)),
                                     AbstentionFeature("sparse_evidence", ("full",))))

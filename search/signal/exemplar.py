"""exemplar: BM25 over one document per task, its name, aliases and help with the queries of
its test cases, coverage-normalised.

Index time: the exemplar memory's BM25 matrix `index.exemplars.lexical` (search.exemplars)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal
from search.signals import coverage_normalise


def scores(index, plan, exact) -> np.ndarray:
    return coverage_normalise(exact(index.exemplars.lexical), plan.exemplar_ideal)


def value(ctx: QueryContext) -> np.ndarray:
    return scores(ctx.index, ctx.plan, ctx.exact)[ctx.rows]


SIGNAL = Signal("exemplar", "sparse", "BM25 over name + aliases + help + the task's case queries", value,
                says="shares words with its name, help or example searches", abstention_evidence=True,
                abstention_features=(AbstentionFeature("exemplar", ("sparse",)),
                                     AbstentionFeature("sparse_evidence", ("full",))))

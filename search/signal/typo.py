"""typo: the lexical and rationale evidence of the query's typo-corrected words, each correction
weighted by its similarity (rapidfuzz; search.prefilter.typo_corrections), coverage-normalised
by the same ideals as those two signals:

    typo(q, t) = lexical(corrected(q), t) + rationale(corrected(q), t)

(0 for a query in another language than the catalog's: search.prefilter.analyse_query corrects
none of its words into the catalog's language.)

Index time: nothing of its own (the two matrices, and the surface vocabulary in index.surface_words)."""
from __future__ import annotations

import numpy as np

from search.signal.base import QueryContext, Signal
from search.signals import column_sum, coverage_normalise


def scores(index, plan, exact=None) -> np.ndarray:
    columns, similarities = list(plan.typo_columns), list(plan.typo_columns.values())
    return (coverage_normalise(column_sum(index.lexical, columns, similarities), plan.lexical_ideal)
            + coverage_normalise(column_sum(index.rationale, columns, similarities), plan.rationale_ideal))


def value(ctx: QueryContext) -> np.ndarray:
    return scores(ctx.index, ctx.plan)[ctx.rows]


SIGNAL = Signal("typo", "sparse", "typo-corrected terms through the lexical and rationale matrices", value,
                says=None,   # the why line says the correction itself ("reads ... as ...")
                abstention_evidence=True)

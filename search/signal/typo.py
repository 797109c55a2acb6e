"""typo: the lexical and rationale evidence of the query's typo-corrected words, each correction
weighted by its similarity, coverage-normalised by the same ideals as those two signals:

    typo(q, t) = lexical(corrected(q), t) + rationale(corrected(q), t)

The corrections are the query's reading, not this signal's alone (search.query.typo_corrections:
rapidfuzz over index.surface_words, at least TYPO_MIN_SIMILARITY, settings.typo_min_similarity,
given once to search.query.analyse_query): the embedder's text and the "why" line read them too.
The query plan turns each into its term's column and similarity (QueryPlan.typo_columns), which
this signal reads. 0 for a query in another language than the catalog's: analyse_query corrects
none of its words into the catalog's language.

Index time: nothing of its own (the two matrices, and the surface vocabulary in index.surface_words)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal
from search.signals import column_sum, coverage_normalise


def scores(index, plan, exact=None) -> np.ndarray:
    columns, similarities = list(plan.typo_columns), list(plan.typo_columns.values())
    return (coverage_normalise(column_sum(index.lexical, columns, similarities), plan.lexical_ideal)
            + coverage_normalise(column_sum(index.rationale, columns, similarities), plan.rationale_ideal))


def value(ctx: QueryContext) -> np.ndarray:
    return scores(ctx.index, ctx.plan)[ctx.rows]


SIGNAL = Signal("typo", "sparse", "typo-corrected terms through the lexical and rationale matrices", value,
                says=None,   # the why line says the correction itself ("reads ... as ...")
                abstention_evidence=True, abstention_features=(AbstentionFeature("typo", ("sparse",)),))

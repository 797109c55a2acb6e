"""lexical: BM25F of the query's terms over each task's name, aliases, category and help (and
enrichment), coverage-normalised to [0, ~1] (search.signals.coverage_normalise).

    lexical(q, t) = sum_{w in q} BM25F(w, t) / ideal(q)
    lexical(q, t) = 0 for every t when q is written in another language than the catalog's
                    (lexicon.language): its words cannot be the catalog's, so "no evidence",
                    not evidence against (the fusion then ranks with the foreign weights)

Index time: the BM25F matrix `index.lexical` (search.index.analyse_tasks; the field weights are
settings.FieldWeights). Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework:
BM25 and Beyond", sec. 3.4 (BM25F)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal
from search.signals import coverage_normalise


def scores(index, plan, exact) -> np.ndarray:
    """Every task's value (the written-cases counterfactual reads it too)."""
    if plan.foreign:
        return np.zeros(index.lexical.shape[0], dtype=np.float32)
    return coverage_normalise(exact(index.lexical), plan.lexical_ideal)


def value(ctx: QueryContext) -> np.ndarray:
    return scores(ctx.index, ctx.plan, ctx.exact)[ctx.rows]


SIGNAL = Signal("lexical", "sparse", "BM25F over name / aliases / category / help", value,
                says=None,   # the why line names the matched words themselves ("matches ...")
                abstention_evidence=True, baseline="BM25F over task name/aliases/category/help only",
                # without embeddings its raw value; with them, part of the words' evidence (with rationale, exemplar)
                abstention_features=(AbstentionFeature("lexical", ("sparse",)),
                                     AbstentionFeature("sparse_evidence", ("full",))))

"""embedding: the cosine of the query's vector (e5, as a query) to the task's text (name,
aliases, category, help, embedded as a passage), raw: absolute, comparable between queries.

A query written in another language than the catalog's (AnalysedQuery.foreign) is compared with
the task's name and help embedded *as a query* instead (search.index.symmetric_text): e5's
symmetric use carries across languages where its asymmetric one does not. Measured on the tune
set only (evaluation/data/languages/tune_headstart_seed7_es.jsonl: Spanish translations of demo
cases outside the reported dev sets; tasks embedded alone, no fit), Hit@1 / MRR of the 41 Spanish
queries against each view of the 150 demo tasks:

    view of the task                          Spanish          the same queries in English
    passage: name, aliases, category, help    0.317 / 0.439    0.732 / 0.799
    query:   name, aliases, category, help    0.512 / 0.628    0.683 / 0.764
    query:   name and help                    0.585 / 0.693    0.732 / 0.784

In the catalog's language the passage view is as good or better, and it is what every English
fit was made with: it stays. The foreign weights are fitted on the query-side view
(search.fitting.foreign, CVQuery.foreign_embedding), so what they learn is what they read.

Index time: `index.task_vectors` and `index.task_query_vectors` (search.assembly.attach_vectors,
cached per text)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray:
    if ctx.analysed.foreign and ctx.index.task_query_vectors is not None:
        return ctx.project(ctx.index.task_query_vectors)
    return ctx.project(ctx.index.task_vectors)


def foreign_value(index, rows: np.ndarray, query_vector: np.ndarray | None) -> np.ndarray | None:
    """The value at the index's `rows` for a query with this vector read as written in another
    language (the query-side view), or None (no vector, no query-side vectors): what the fit's
    foreign weights are fitted on (search.fitting.cv, CVQuery.foreign_embedding)."""
    if query_vector is None or index.task_query_vectors is None:
        return None
    return index.task_query_vectors[rows] @ query_vector


SIGNAL = Signal("embedding", "dense", "cosine of the query to the task text", value,
                says="close in meaning to its description", baseline="e5 cosine to the task text only",
                abstention_features=(AbstentionFeature("embedding", ("full",)),))

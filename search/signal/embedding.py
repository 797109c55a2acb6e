"""embedding: the cosine of the query's vector (e5, as a query) to the task's text (name,
aliases, category, help, embedded as a passage), raw: absolute, comparable between queries.

Index time: `index.task_vectors` (search.assembly.attach_vectors, cached per text)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray:
    return ctx.project(ctx.index.task_vectors)


SIGNAL = Signal("embedding", "dense", "cosine of the query to the task text", value,
                says="close in meaning to its description", baseline="e5 cosine to the task text only",
                abstention_features=(AbstentionFeature("embedding", ("full",)),))

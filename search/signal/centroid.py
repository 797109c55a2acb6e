"""centroid: the cosine of the query's vector to the mean of the task's exemplars (its case
queries, name and aliases, embedded as queries); 0 for a task without exemplars.

Index time: `index.exemplars.centroids` (search.signals.centroid_vectors)."""
from __future__ import annotations

import numpy as np

from search.signal.base import AbstentionFeature, QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray:
    return ctx.centroid


SIGNAL = Signal("centroid", "dense", "cosine to the mean of the task's exemplars", value,
                says="close in meaning to its name and example searches",
                baseline="e5 cosine to the centroid of the task's exemplars only",
                abstention_features=(AbstentionFeature("centroid", ("full",)),))

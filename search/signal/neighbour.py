"""neighbour: the cosine of the query's vector to the task's nearest exemplar; -1 for a task
without exemplars. Past NEIGHBOUR_FULL_SCAN exemplars, a cascade: only the tasks whose centroid
is among the closest are scanned (search.prefilter.neighbour_signals).

Index time: the exemplar vectors, grouped by task (search.exemplars)."""
from __future__ import annotations

import numpy as np

from search.signal.base import QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray:
    return ctx.neighbours[0]


SIGNAL = Signal("neighbour", "dense", "cosine to the task's nearest exemplar", value,
                says="close in meaning to its name and example searches",
                baseline="e5 cosine to the task's nearest exemplar only")

"""prototype: the logit of a softmax regression over the exemplars (one prototype vector per
task, fitted per catalog; search.prototypes): only once a per-catalog fit has made one.

Index time: `index.prototypes` (the fit's, search.ranker.RankerParams.prototype_matrix)."""
from __future__ import annotations

import numpy as np

from search.signal.base import QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray | None:
    prototypes = ctx.index.prototypes
    return None if prototypes is None else ctx.project(prototypes)


SIGNAL = Signal("prototype", "dense",
                "logit of the per-catalog softmax regression over the exemplars (exists only with a fit)", value,
                says="a model of how people ask for each task ranks it here", fit_only=True)

"""learned: the cosine of the query's vector to the task's nearest learned exemplar, a query
people found the task with (search.learned.learned_signal): only with a fit that has learned
evidence and weighs it, full mode only. Where its weight is 0 the prefilter computes it at the
returned tasks only (search.prefilter.DEFERRABLE).

Index time: the learned memory `index.learned` (search.learned.build_learned_memory, with its
vectors from search.fitting.attach_vectors)."""
from __future__ import annotations

import numpy as np

from search.learned import learned_signal
from search.signal.base import QueryContext, Signal


def value(ctx: QueryContext) -> np.ndarray | None:
    return learned_signal(ctx.index.learned, ctx.rows, ctx.query_vector)


SIGNAL = Signal("learned", "learned",
                "cosine to the task's nearest learned exemplar (queries staff found it with; exists only with a fit "
                "that has learned evidence, full mode only; see docs/learning-from-use.md)", value,
                says="learned from searches",   # only where it added to the score (contributions.learned)
                fit_only=True)

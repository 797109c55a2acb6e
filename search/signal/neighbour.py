"""neighbour: the cosine of the query's vector to the task's nearest exemplar; -1 for a task
without exemplars. Past NEIGHBOUR_FULL_SCAN exemplars, a cascade: only the tasks whose centroid
is among the closest are scanned (search.exemplars.neighbour_signals).

It is the abstention's main evidence with embeddings (search.confidence): its value, and two
features of it at the top answer,

    neighbour_gap = neighbour - typical(t)     typical(t): the cosine of the task's own exemplars
                                               to their nearest sibling (local geometry; the
                                               `typical` evidence, search.exemplars.typical_neighbour)
    oos_gap       = oos(q) - neighbour         oos(q): the cosine to the nearest written
                                               out-of-scope case (0 without one)

Index time: the exemplar vectors, grouped by task (search.exemplars)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from search.signal.base import AbstentionFeature, Evidence, QueryContext, Ranking, Signal


def value(ctx: QueryContext) -> np.ndarray:
    return ctx.neighbours[0]


def typical(ctx: QueryContext) -> np.ndarray | None:
    """Each task's typical nearest-sibling cosine among its exemplars (None: no vectors)."""
    spread = ctx.index.exemplars.typical
    return None if spread is None else spread[ctx.rows]


def gap_to_typical(signals: Mapping[str, float], result: Ranking) -> float:
    return signals["neighbour"] - result.evidence.get("typical", signals["neighbour"])


def gap_to_out_of_scope(signals: Mapping[str, float], result: Ranking) -> float:
    oos = result.out_of_scope_similarity
    return (oos - signals["neighbour"]) if oos is not None else 0.0


SIGNAL = Signal("neighbour", "dense", "cosine to the task's nearest exemplar", value,
                says="close in meaning to its name and example searches",
                baseline="e5 cosine to the task's nearest exemplar only",
                abstention_features=(AbstentionFeature("neighbour", ("full",)),
                                     AbstentionFeature("neighbour_gap", ("full",), gap_to_typical),
                                     AbstentionFeature("oos_gap", ("full",), gap_to_out_of_scope)),
                evidence=(Evidence("typical", typical),))

"""Per-query signal vectors, so that many weight settings can be scored without re-running
the prefilter: cross-validated weight tuning and threshold fitting rank each query hundreds of
times. The signals, the fusion and the ordering are the prefilter's own functions
(`search.prefilter.signal_values`, `fuse`, `rank_order`), so a block ranks exactly as the
product does; a test checks it against `prefilter` itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from search.index import SearchIndex
from search.prefilter import analyse_query, fuse, rank_order, signal_values
from settings import Weights


@dataclass(frozen=True)
class SignalBlock:
    """One query's signal values over all active tasks (rows of `task_ids`)."""

    task_ids: tuple[str, ...]
    names: tuple[str, ...]
    values: dict[str, np.ndarray]        # signal -> (tasks,) in [0, 1]
    pinned: tuple[str, ...]              # gold ids of a test case with the same term set

    def fused(self, weights: Weights) -> tuple[np.ndarray, dict[str, float]]:
        return fuse(self.values, weights)

    def rank(self, weights: Weights, k: int, use_pins: bool = True) -> list[str]:
        fused, _ = self.fused(weights)
        order = rank_order(list(self.names), list(self.task_ids), fused, self.pinned if use_pins else (), k)
        return [self.task_ids[i] for i in order]


def query_vector(index: SearchIndex, embedder, query: str, typo_min_similarity: float = 80.0) -> np.ndarray | None:
    """The query's embedding as the product computes it (of the typo-corrected text), or None."""
    if embedder is None or index.task_vectors is None:
        return None
    return embedder.embed([analyse_query(index, query, typo_min_similarity).embedding_text], "query")[0]


def embedding_texts(index: SearchIndex, queries, typo_min_similarity: float = 80.0) -> list[str]:
    """What `query_vector` will embed, for warming the embedding cache in batches."""
    return [analyse_query(index, q, typo_min_similarity).embedding_text for q in queries]


def signal_block(index: SearchIndex, query: str, embedder, typo_min_similarity: float = 80.0) -> SignalBlock:
    """The prefilter's per-task signals for `query` over every active task (roles not applied)."""
    analysed = analyse_query(index, query, typo_min_similarity)
    rows = np.flatnonzero(index.visible_mask(None, restrict=False))
    values = signal_values(index, analysed, rows, query_vector(index, embedder, query, typo_min_similarity))
    task_ids = tuple(index.tasks[r].id for r in rows)
    present = set(task_ids)
    pinned = tuple(t for t in index.lexicon.pinned_for(query) if t in present)
    return SignalBlock(task_ids, tuple(index.tasks[r].name for r in rows), values, pinned)

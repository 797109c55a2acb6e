"""Per-query signal vectors, so that many weight settings can be scored without re-running
the prefilter: cross-validated weight tuning and threshold fitting rank each query hundreds of
times. `SignalBlock.rank(weights)` reproduces `search.prefilter.prefilter` exactly (pins first,
then fused score, then name; the same effective-weight renormalisation) and is tested against it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lexicon.text import words
from search.index import SearchIndex
from search.prefilter import effective_weights, plan_query, sparse_signals, typo_corrections
from search.signals import min_max_normalise, unique
from settings import Weights

SIGNAL_ORDER = ("lexical", "rationale", "embedding", "typo")


@dataclass(frozen=True)
class SignalBlock:
    """One query's signal values over all active tasks (rows of `task_ids`)."""

    task_ids: tuple[str, ...]
    names: tuple[str, ...]
    values: dict[str, np.ndarray]        # signal -> (tasks,) in [0, 1]
    pinned: tuple[str, ...]              # gold ids of a test case with the same term set

    def fused(self, weights: Weights, use_pins: bool = True) -> tuple[np.ndarray, dict[str, float]]:
        w = effective_weights(weights, set(self.values))
        # the very expression of search.prefilter.prefilter, so float rounding (and ties) agree
        fused = sum(w[name] * value for name, value in self.values.items())
        return np.asarray(fused), w

    def rank(self, weights: Weights, k: int, use_pins: bool = True) -> tuple[list[str], list[float]]:
        fused, _ = self.fused(weights)
        pins = {task_id: r for r, task_id in enumerate(self.pinned)} if use_pins else {}
        fused32 = fused
        order = sorted(range(len(self.task_ids)),
                       key=lambda i: (pins.get(self.task_ids[i], len(pins)), -fused32[i], self.names[i]))[:k]
        return [self.task_ids[i] for i in order], [float(fused32[i]) for i in order]

    def rank_fast(self, weights: Weights, k: int, use_pins: bool = True) -> list[str]:
        """Top-k ids by fused score (pins first); ties broken by name via a stable lexsort."""
        fused, _ = self.fused(weights)
        pin_rank = np.full(len(self.task_ids), len(self.pinned), dtype=np.int64)
        if use_pins:
            for r, task_id in enumerate(self.pinned):
                pin_rank[self.task_ids.index(task_id)] = r
        order = np.lexsort((self._name_order, -fused, pin_rank))[:k]
        return [self.task_ids[i] for i in order]

    @property
    def _name_order(self) -> np.ndarray:
        cached = getattr(self, "_name_rank", None)
        if cached is None:
            ranks = np.empty(len(self.names), dtype=np.int64)
            ranks[np.argsort(np.array(self.names, dtype=object), kind="stable")] = np.arange(len(self.names))
            object.__setattr__(self, "_name_rank", ranks)
            cached = ranks
        return cached


def signal_block(index: SearchIndex, query: str, query_vector: np.ndarray | None,
                 typo_min_similarity: float = 80.0) -> SignalBlock:
    """The prefilter's per-task signals for `query` over every active task (roles not applied)."""
    query_words = unique(words(query))
    corrections = typo_corrections(index, query_words, typo_min_similarity)
    rows = np.flatnonzero(index.visible_mask(None, restrict=False))
    values = {name: scores[rows] for name, scores in
              sparse_signals(index, plan_query(index, query_words, corrections)).items()}
    if query_vector is not None and index.task_vectors is not None:
        values["embedding"] = min_max_normalise(index.task_vectors[rows] @ query_vector)
    task_ids = tuple(index.tasks[r].id for r in rows)
    present = set(task_ids)
    pinned = tuple(t for t in index.lexicon.pinned_for(query) if t in present)
    return SignalBlock(task_ids, tuple(index.tasks[r].name for r in rows),
                       values, pinned)

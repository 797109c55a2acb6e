"""Cross-validation inside the TRAINING split (weight tuning, threshold fitting).

Each fold builds the lexicon from the other folds' cases only and ranks the fold's own cases,
so every validation query is scored exactly as a held-out query would be. The held-out split
never enters: callers pass the training cases only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.index import build_index
from settings import Settings

from .fastrank import SignalBlock, embedding_texts, signal_block
from .runner import embed_queries, progress, task_vectors
from .splits import bucket, k_folds


@dataclass(frozen=True)
class CVQuery:
    case: CaseRecord
    fold: int
    block: SignalBlock


def cv_blocks(settings: Settings, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord], embedder,
              folds: int = 5, seed: int = 42, max_queries: int | None = None, show: bool = False,
              vectors=None) -> list[CVQuery]:
    """Signal blocks of every training case, each scored by a lexicon built without its fold.

    `max_queries` caps the number of validation queries (a deterministic hash sample, the same
    whatever the order of cases) to bound embedding cost on large suites; the lexicon of each
    fold is still built from all the other folds' cases."""
    tasks = [t for t in tasks if t.active]
    if vectors is None:
        vectors = task_vectors(embedder, tasks)
    sampled = None
    if max_queries is not None and len(train) > max_queries:
        ranked = sorted(train, key=lambda c: bucket(seed + 2, c.query))
        sampled = {c.query for c in ranked[:max_queries]}
    out: list[CVQuery] = []
    for fold, (fit, held) in enumerate(k_folds(list(train), folds, seed)):
        if sampled is not None:
            held = [c for c in held if c.query in sampled]
        index = build_index(tasks, build_lexicon(fit), settings.field_weights)
        if vectors is not None:
            index = index.with_vectors(vectors)
        if vectors is not None:
            embed_queries(embedder, embedding_texts(index, [c.query for c in held], settings.typo_min_similarity), show)
        for case in progress(held, f"cv fold {fold + 1}/{folds}", show):
            block = signal_block(index, case.query, embedder if vectors is not None else None,
                                 settings.typo_min_similarity)
            out.append(CVQuery(case, fold, block))
    return out

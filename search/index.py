"""SearchIndex: everything the prefilter needs, precomputed from the catalog and the lexicon.

Built by a pure function (`build_index`) from plain records, so the live service, the
evaluation runs and the tests all build it the same way. Query time only reads it.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from catalog.records import TaskRecord
from lexicon.rationale import RationaleLexicon
from lexicon.text import stem, words
from search.signals import bm25_saturate, bm25f_pseudo_tf, lucene_idf, rationale_weight
from settings import FieldWeights

# Extra vocabulary per task (DF-aware enrichment, see kb/): {task id: [(term or phrase, weight)]}
Enrichment = Mapping[str, Sequence[tuple[str, float]]]
ENRICHED_FIELD_WEIGHT = 1.0


def task_fields(task: TaskRecord) -> dict[str, str]:
    return {
        "name": task.name,
        "aliases": " ; ".join(task.aliases),
        "category": (task.category or "").replace("_", " "),
        "help": task.help,
    }


def embedding_text(task: TaskRecord) -> str:
    """What a task's embedding represents: its metadata concatenated (t_concat of Eq. 5)."""
    parts = [task.name, *task.aliases, (task.category or "").replace("_", " "), task.help]
    return ". ".join(p for p in parts if p)


@dataclass(frozen=True)
class IdealWeights:
    """Per term, the best weight any task has for it; `default` stands in for unknown words.
    Denominators of the coverage normalisation (see search.signals.coverage_normalise)."""

    per_term: np.ndarray
    default: float

    @classmethod
    def of(cls, matrix: np.ndarray) -> "IdealWeights":
        per_term = matrix.max(axis=0) if matrix.size else np.zeros(matrix.shape[1], dtype=np.float32)
        positive = per_term[per_term > 0]
        return cls(per_term, float(np.median(positive)) if positive.size else 1.0)

    def of_term(self, column: int | None) -> float:
        if column is None:
            return self.default
        return float(self.per_term[column]) or self.default


@dataclass(frozen=True)
class SearchIndex:
    tasks: tuple[TaskRecord, ...]
    vocabulary: Mapping[str, int]           # term -> column
    lexical: np.ndarray                     # (tasks, terms) BM25F weights
    rationale: np.ndarray                   # (tasks, terms) rationale-lexicon weights
    lexical_ideal: IdealWeights
    rationale_ideal: IdealWeights
    field_terms: tuple[Mapping[str, frozenset[str]], ...]  # per task: field -> terms (explanations)
    surface_words: tuple[str, ...]          # typo-correction vocabulary (catalog + lexicon)
    surface_to_term: Mapping[str, str]
    lexicon: RationaleLexicon
    task_vectors: np.ndarray | None = None  # (tasks, dim) L2-normalised, or None
    _visibility: dict = field(default_factory=dict, compare=False, repr=False)

    def visible_mask(self, role: str | None, restrict: bool = True) -> np.ndarray:
        """Tasks the caller may see; `restrict=False` (evaluation) sees every active task."""
        key = (role, restrict)
        if key not in self._visibility:
            self._visibility[key] = np.array(
                [t.active and (not restrict or t.visible_to(role)) for t in self.tasks], dtype=bool)
        return self._visibility[key]

    def with_vectors(self, vectors: np.ndarray | None) -> "SearchIndex":
        return replace(self, task_vectors=vectors, _visibility={})


def build_index(tasks: Sequence[TaskRecord], lexicon: RationaleLexicon, field_weights: FieldWeights,
                enrichment: Enrichment | None = None) -> SearchIndex:
    weights = {"name": field_weights.name, "aliases": field_weights.aliases,
               "category": field_weights.category, "help": field_weights.help,
               "enriched": ENRICHED_FIELD_WEIGHT}
    surface: dict[str, str] = {}
    per_task_tfs: list[dict[str, Counter]] = []
    for task in tasks:
        fields_tf: dict[str, Counter] = {}
        for name, text in task_fields(task).items():
            ws = words(text)
            for w in ws:
                surface.setdefault(w, stem(w))
            fields_tf[name] = Counter(stem(w) for w in ws)
        extra = Counter()
        for phrase, weight in (enrichment or {}).get(task.id, ()):
            for w in words(phrase):
                extra[stem(w)] += weight
        fields_tf["enriched"] = extra
        per_task_tfs.append(fields_tf)
    for w in lexicon.surface_words:
        surface.setdefault(w, stem(w))

    vocab_terms = sorted({t for tfs in per_task_tfs for c in tfs.values() for t in c} | set(lexicon.associations))
    vocabulary = {term: i for i, term in enumerate(vocab_terms)}
    n_tasks = len(tasks)

    lengths = [{f: sum(c.values()) for f, c in tfs.items()} for tfs in per_task_tfs]
    avg = {f: (sum(l[f] for l in lengths) / n_tasks if n_tasks else 0.0) for f in weights}
    df = Counter(t for tfs in per_task_tfs for t in {t for c in tfs.values() for t in c})
    lexical = np.zeros((n_tasks, len(vocabulary)), dtype=np.float32)
    for row, tfs in enumerate(per_task_tfs):
        for term in {t for c in tfs.values() for t in c}:
            pseudo = bm25f_pseudo_tf({f: c.get(term, 0) for f, c in tfs.items()}, lengths[row], avg, weights)
            lexical[row, vocabulary[term]] = bm25_saturate(pseudo, lucene_idf(df[term], n_tasks))

    row_of = {task.id: row for row, task in enumerate(tasks)}
    rationale = np.zeros_like(lexical)
    for term, linked in lexicon.associations.items():
        present = {tid: count for tid, count in linked.items() if tid in row_of}
        term_links = sum(present.values())
        for task_id, count in present.items():
            rationale[row_of[task_id], vocabulary[term]] = rationale_weight(count, term_links, len(present), n_tasks)

    field_terms = tuple({f: frozenset(c) for f, c in tfs.items() if c} for tfs in per_task_tfs)
    return SearchIndex(tasks=tuple(tasks), vocabulary=vocabulary, lexical=lexical, rationale=rationale,
                       lexical_ideal=IdealWeights.of(lexical), rationale_ideal=IdealWeights.of(rationale),
                       field_terms=field_terms, surface_words=tuple(sorted(surface)),
                       surface_to_term=surface, lexicon=lexicon)

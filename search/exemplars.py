"""Exemplar memory: every test case's whole query kept as phrase-level evidence for its tasks.

The rationale lexicon (Eq. 1) reduces a test case to term -> task links. The exemplar memory
keeps each case query whole, so a user's query can be compared with the phrasings people
actually use for a task:

- `exemplar` (lexical): BM25 of the user's query against one document per task holding its
  name, aliases and help AND all its case queries: exactly what "plain BM25 over name + help +
  the test cases" does, as one signal among the others, with a weight fitted per catalog (so
  the fusion starts from the baseline a customer would otherwise deploy, never below it);
- `centroid`: cosine to the normalised mean of the task's exemplar vectors (Rocchio prototype);
- `neighbour`: cosine to the task's nearest exemplar (1-NN).

Each task's name and aliases are exemplars too (embedded as queries, as a user would type
them), so a task with no test case still has a centroid and a nearest neighbour: that is what
makes the dense exemplar signals usable on a cold-start catalog. Out-of-scope cases (empty
gold) are kept apart: they are evidence for abstention, not for any task.

Built at index time (texts and BM25 postings); the vectors are attached once the embedder has
answered (`with_vectors`), so a query only does one matrix-vector product and a grouped max.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse

from catalog.records import CaseRecord, TaskRecord
from lexicon.language import in_other_language
from lexicon.text import terms
from search.bm25 import bm25_matrix
from search.signals import (centroid_vectors, group_max, grouped_products, half_screen_available, half_screen_error,
                            screened_group_max, segment_offsets, selected_rows)

# From this many exemplars on, a memory keeps a float16 copy of its vectors for the neighbour
# cascade's screen (search.signals.screened_group_max; the cascade starts at NEIGHBOUR_FULL_SCAN, 4,096):
# 15,000 exemplars take 11 MB more, and the cascade ~0.4 ms less (docs/design/performance.md).
SCREEN_FROM = 4_096


def task_exemplar_texts(task: TaskRecord) -> list[str]:
    """What a task says about itself in a user's words: its name and aliases."""
    return list(dict.fromkeys(text for text in (task.name, *task.aliases) if text.strip()))


@dataclass(frozen=True)
class ExemplarMemory:
    texts: tuple[str, ...]             # exemplar texts, grouped by task (a case with 2 gold tasks appears twice)
    task_rows: np.ndarray              # (E,) task row of each exemplar, non-decreasing
    group_starts: np.ndarray           # start offset of each task's group (tasks with exemplars only)
    group_rows: np.ndarray             # the task row of each group
    group_ends: np.ndarray             # end offset of each group (the next group's start)
    group_of_task: np.ndarray          # (tasks,) the group of each task row, -1 for a task without exemplars
    lexical: sparse.csc_matrix         # (tasks x terms) BM25 over each task's name, aliases, help and case queries
    oos_texts: tuple[str, ...]         # out-of-scope case queries
    case_counts: np.ndarray            # (tasks,) number of test cases naming the task
    vectors: np.ndarray | None = None  # (E, dim) L2-normalised query embeddings of `texts`
    centroids: np.ndarray | None = None
    oos_vectors: np.ndarray | None = None
    typical: np.ndarray | None = None  # (tasks,) typical_neighbour of each task's exemplars
    written: np.ndarray | None = None  # (E,) True for an exemplar of a written case (or a name, an alias);
                                       # None when no case was learned from use (CaseRecord.implicit)
    other_language: np.ndarray | None = None  # (E,) True for an exemplar written in another language than
                                              # the catalog's; None when there is none
    screen: np.ndarray | None = None   # `vectors` in float16, for the cascade's screen (SCREEN_FROM)
    screen_error: float = 0.0          # half_screen_error of `vectors`, per unit of query norm

    @property
    def n_tasks(self) -> int:
        return self.lexical.shape[0]

    def with_vectors(self, vectors: np.ndarray | None, oos_vectors: np.ndarray | None) -> "ExemplarMemory":
        if vectors is None:
            return replace(self, vectors=None, centroids=None, oos_vectors=None, typical=None, screen=None,
                           screen_error=0.0)
        screen, error = None, 0.0
        if len(vectors) >= SCREEN_FROM and vectors.ndim == 2 and half_screen_available():
            screen = vectors.astype(np.float16)
            error = half_screen_error(vectors.shape[1], float(np.linalg.norm(vectors, axis=1).max()))
        return replace(self, vectors=vectors, centroids=centroid_vectors(vectors, self.task_rows, self.n_tasks),
                       oos_vectors=oos_vectors, typical=typical_neighbour(vectors, self.group_starts, self.group_rows,
                                                                          self.n_tasks, self.other_language),
                       screen=screen, screen_error=error)

    def neighbour(self, query_vector: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Per task, the cosine of the query to its nearest exemplar (-1 without exemplars).
        With `rows`, only those tasks' exemplars are compared (the cascade: neighbour_signals),
        read in place (grouped_products); the others get -1."""
        return self.neighbours(query_vector, rows, written=False)[0]

    def neighbours(self, query_vector: np.ndarray, rows: np.ndarray | None = None, written: bool = True
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """(neighbour, the same over the written cases' exemplars only): the second is None
        unless `written` and cases learned from use are among the exemplars (then it is what
        the written-cases-only memory gives, for contributions.learned). A cascade over a large
        memory screens in float16 first (screened_group_max: the same float32 maxima)."""
        mask = self.written if written else None
        if rows is None or rows.size * 2 >= self.n_tasks:
            values = self.vectors @ query_vector
            best = group_max(values, self.group_starts, self.n_tasks, self.group_rows)
            if mask is None:
                return best, None
            return best, group_max(np.where(mask, values, -1.0), self.group_starts, self.n_tasks, self.group_rows)
        groups = self.group_of_task[rows]
        groups = np.sort(groups[groups >= 0])
        starts, ends = self.group_starts[groups], self.group_ends[groups]
        best = np.full(self.n_tasks, -1.0, dtype=np.float32)
        kept = np.full(self.n_tasks, -1.0, dtype=np.float32) if mask is not None else None
        if not groups.size:
            return best, kept
        if self.screen is not None:
            maxima, kept_maxima = screened_group_max(self.vectors, self.screen, self.screen_error, starts, ends,
                                                     query_vector, mask)
        else:
            offsets = segment_offsets(ends - starts)
            values = grouped_products(self.vectors, starts, ends, query_vector)
            maxima = np.maximum.reduceat(values, offsets)
            kept_maxima = None if mask is None else np.maximum.reduceat(
                np.where(mask[selected_rows(starts, ends - starts)], values, -1.0), offsets)
        best[self.group_rows[groups]] = maxima
        if kept is not None:
            kept[self.group_rows[groups]] = kept_maxima
        return best, kept

    def nearest_out_of_scope(self, query_vector: np.ndarray) -> float | None:
        """Cosine of the query to the closest out-of-scope case, or None without any."""
        if self.oos_vectors is None or not len(self.oos_vectors):
            return None
        return float((self.oos_vectors @ query_vector).max())


TYPICAL_SAMPLE = 128   # exemplars per task whose nearest sibling is looked up (a bounded cost per task)


def typical_neighbour(vectors: np.ndarray, starts: np.ndarray, group_rows: np.ndarray, n_tasks: int,
                      other_language: np.ndarray | None = None) -> np.ndarray:
    """Per task, how close its own phrasings are to each other: the median, over its exemplars,
    of the cosine to the nearest OTHER exemplar of the same task (leave-one-out 1-NN),

        typical(t) = median_{e in E_t} max_{e' in E_t, e' != e} cos(e, e')

    The local geometry a query's nearest-exemplar cosine is judged against (search.confidence):
    0.9 to a task whose phrasings all look alike is weak evidence, 0.8 to a task whose phrasings
    are spread out is strong. Tasks with a single exemplar get the median of the others (the
    catalog's typical spread); at most TYPICAL_SAMPLE exemplars per task are looked up (evenly
    spaced), each against all of its task's exemplars.

    Only the exemplars in the catalog's language count (`other_language` marks the others): a
    translation is not another phrasing, and its cosine to the text it translates (a task name and
    its Spanish alias) would make the task's phrasings look alike to the catalog-language queries
    the neighbour gap judges (search.index.embedding_text has the measurement)."""
    out = np.full(n_tasks, np.nan, dtype=np.float32)
    ends = np.append(starts[1:], len(vectors)).astype(np.int64)
    for start, end, row in zip(starts, ends, group_rows):
        group = vectors[start:end]
        if other_language is not None:
            group = group[~other_language[start:end]]
        if len(group) < 2:
            continue
        picked = _sample_rows(len(group))
        similarity = group[picked] @ group.T
        similarity[np.arange(picked.size), picked] = -np.inf
        out[row] = _median(similarity.max(axis=1))
    known = out[~np.isnan(out)]
    return np.where(np.isnan(out), float(np.median(known)) if known.size else 1.0, out).astype(np.float32)


def _sample_rows(n: int) -> np.ndarray:
    """The TYPICAL_SAMPLE evenly spaced rows of a group of n (all n when they are fewer)."""
    if n <= TYPICAL_SAMPLE:   # linspace(0, n - 1, n) is 0, 1, ..., n - 1 exactly
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, TYPICAL_SAMPLE).astype(np.int64))


def _median(values: np.ndarray) -> float:
    """np.median of a 1-D float32 array without NaN, to the bit: the middle value, or the float32
    mean of the two middle ones (their float32 sum halved, as np.mean computes it). np.median's
    generic path (partition, a NaN check, np.mean) was 40% of typical_neighbour, which runs at
    every index build with embeddings (the demo's memory, 200 tasks and 571 exemplars: 17-23 -> 3.4-5.5 ms
    a build with the row sample above, medians on the slow AMD EPYC kind, ops/bench_typical.py;
    tests/test_abstention.py checks the bits)."""
    ordered = np.sort(values)
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / np.float32(2))


def exemplar_documents(tasks: Sequence[TaskRecord]) -> list[list[str]]:
    """The task part of each task's exemplar BM25 document: the terms of its name, aliases and help."""
    # each part in its own language (an alias may be Spanish): the same terms as the joined text otherwise
    return [[term for part in (t.name, *t.aliases, t.help) for term in terms(part)] for t in tasks]


def build_exemplars(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], vocabulary: Mapping[str, int],
                    task_documents: Sequence[Sequence[str]] | None = None) -> ExemplarMemory:
    """`task_documents`: `exemplar_documents(tasks)`, when the caller has it already."""
    row_of = {task.id: row for row, task in enumerate(tasks)}
    per_task: list[list[str]] = [task_exemplar_texts(t) for t in tasks]
    from_written: list[list[bool]] = [[True] * len(texts) for texts in per_task]
    documents: list[list[str]] = [list(d) for d in (task_documents if task_documents is not None
                                                     else exemplar_documents(tasks))]
    case_counts = np.zeros(len(tasks), dtype=np.int32)
    oos: list[str] = []
    for case in cases:
        if not case.gold:
            oos.append(case.query)
            continue
        query_terms = terms(case.query)
        for task_id in case.gold:
            row = row_of.get(task_id)
            if row is None:
                continue
            per_task[row].append(case.query)
            from_written[row].append(not case.implicit)
            documents[row].extend(query_terms)
            case_counts[row] += 1
    texts, owners, starts, group_rows, written = [], [], [], [], []
    for row, exemplars in enumerate(per_task):
        if not exemplars:
            continue
        starts.append(len(texts))
        group_rows.append(row)
        texts.extend(exemplars)
        owners.extend([row] * len(exemplars))
        written.extend(from_written[row])
    group_of_task = np.full(len(tasks), -1, dtype=np.int64)
    group_of_task[group_rows] = np.arange(len(group_rows))
    other_language = np.fromiter((in_other_language(text) for text in texts), dtype=bool, count=len(texts))
    return ExemplarMemory(
        texts=tuple(texts), task_rows=np.asarray(owners, dtype=np.int64),
        group_starts=np.asarray(starts, dtype=np.int64), group_rows=np.asarray(group_rows, dtype=np.int64),
        group_ends=np.asarray(starts[1:] + [len(texts)], dtype=np.int64), group_of_task=group_of_task,
        lexical=bm25_matrix([Counter(d) for d in documents], vocabulary), oos_texts=tuple(dict.fromkeys(oos)),
        case_counts=case_counts,
        written=None if all(written) else np.asarray(written, dtype=bool),
        other_language=other_language if other_language.any() else None)


# --- the neighbour signal's query-time scan (search/signal/neighbour.py) -------------------------------

# Past this many exemplars, the nearest-neighbour signal is computed only for the tasks whose
# centroid is among the closest (a cascade: the centroid is a cheap first stage of the same
# evidence): a quarter of the visible tasks, at least 64 and at most 256; the rest get the
# lowest computed value. A full scan of 15,000 exemplars costs ~0.8 ms, the cascade ~0.3 ms.
NEIGHBOUR_FULL_SCAN = 4_096
NEIGHBOUR_CANDIDATES = (64, 256)


def neighbour_candidates(n_visible: int) -> int:
    """How many tasks the cascade scans among `n_visible` (NEIGHBOUR_CANDIDATES)."""
    low, high = NEIGHBOUR_CANDIDATES
    return min(high, max(low, n_visible // 4))


def neighbour_signal(memory: ExemplarMemory, rows: np.ndarray, centroid: np.ndarray,
                     query_vector: np.ndarray) -> np.ndarray:
    """Nearest-exemplar cosine of each visible task: a full scan of the exemplars when they are
    few, else the cascade over the tasks whose centroid is closest (see NEIGHBOUR_FULL_SCAN)."""
    return neighbour_signals(memory, rows, centroid, query_vector)[0]


def neighbour_signals(memory: ExemplarMemory, rows: np.ndarray, centroid: np.ndarray, query_vector: np.ndarray,
                      written: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """neighbour_signal, and with `written` (where cases learned from use joined the memory)
    the same over the written cases' exemplars, from the same products: the counterfactual's
    neighbour (search.prefilter.written_values), NaN at the tasks the cascade did not reach."""
    candidates = neighbour_candidates(rows.size)
    if len(memory.texts) <= NEIGHBOUR_FULL_SCAN or rows.size <= candidates:
        best, kept = memory.neighbours(query_vector, written=written)
        return best[rows], None if kept is None else kept[rows]
    top = np.argpartition(-centroid, candidates)[:candidates]
    full, kept = memory.neighbours(query_vector, rows[top], written=written)
    others = np.full(rows.size, float(full[rows[top]].min()), dtype=np.float32)
    others[top] = -1.0
    if kept is not None:
        reached = np.full(rows.size, np.nan, dtype=np.float32)
        reached[top] = kept[rows[top]]
        kept = reached
    return np.maximum(full[rows], others), kept

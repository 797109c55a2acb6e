"""The scoring math of the hybrid prefilter, one small function per formula.

Index time turns every signal into a (tasks x terms) weight matrix, so query time is a
column sum: a cheap lookup, in the spirit of bm25s (Lù, 2024).
"""
from __future__ import annotations

import bisect
import math
from typing import Iterable, Mapping, Sequence

import numpy as np
from rapidfuzz import fuzz, process
from scipy import sparse

BM25_K1 = 1.2
# Short fields (names, aliases) are barely length-normalised: "ASQ-3 Screening" and
# "ASQ:SE-2 Social-Emotional Screening" should not differ much because of length alone.
BM25_B = {"name": 0.3, "aliases": 0.3, "category": 0.0, "help": 0.75, "enriched": 0.5}


def lucene_idf(df: int, n_docs: int) -> float:
    """idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)): Lucene's BM25 IDF, never negative
    (unlike the Robertson-Sparck Jones form that rank-bm25 uses)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25f_pseudo_tf(field_tfs: Mapping[str, int], field_lengths: Mapping[str, int],
                    avg_lengths: Mapping[str, float], field_weights: Mapping[str, float]) -> float:
    """BM25F (Robertson, Zaragoza & Taylor, 2004): each field's term frequency is length-
    normalised with its own b_f and scaled by its weight w_f, then summed:

        tf~ = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)
    """
    total = 0.0
    for field, tf in field_tfs.items():
        if tf == 0:
            continue
        b = BM25_B[field]
        norm = 1.0 - b + b * field_lengths[field] / max(avg_lengths[field], 1e-9)
        total += field_weights[field] * tf / norm
    return total


def bm25_saturate(pseudo_tf: float, idf: float, k1: float = BM25_K1) -> float:
    """w(t, d) = idf(t) * tf~ / (k1 + tf~): the BM25 saturation of a (pseudo) term frequency."""
    return idf * pseudo_tf / (k1 + pseudo_tf) if pseudo_tf > 0 else 0.0


def rationale_weight(link_count: int, term_links: int, tasks_linked: int, n_tasks: int) -> float:
    """Weighted Eq. 4 of the design paper. The paper counts each (w, t) in L once; that lets a
    generic rationale word ("child", "record") boost every task it was ever written next to.
    We weight the link by how much of w's evidence points at t and by how specific w is:

        s(w, t) = P(t | w) * ln(1 + N / n_w),   P(t | w) = c_wt / c_w

    (a translation-model reading of the lexicon, Berger & Lafferty 1999), with c_wt the number
    of test cases linking w and t, c_w all links of w, n_w the tasks linked to w, N the catalog
    size. Measured on the training split's cross-validation: +0.03 Hit@5 over the indicator.
    """
    return (link_count / max(term_links, 1)) * math.log(1.0 + n_tasks / max(tasks_linked, 1))


def column_sum(matrix: sparse.csc_matrix, columns: Sequence[int], weights: Sequence[float] | None = None) -> np.ndarray:
    """Sum of the given term columns (optionally weighted): the query-time score of a signal.

    The matrices are (tasks x terms) CSC, so a column is a contiguous slice of postings: the
    cost is the number of postings of the query's terms, not the size of the catalog."""
    out = np.zeros(matrix.shape[0], dtype=np.float32)
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    for position, column in enumerate(columns):
        start, end = int(indptr[column]), int(indptr[column + 1])
        if end > start:
            if weights is None:   # (1.0 * x == x: the unweighted sum skips the product)
                out[indices[start:end]] += data[start:end]
            else:
                out[indices[start:end]] += float(weights[position]) * data[start:end]
    return out


def column_max(matrix: sparse.csc_matrix) -> np.ndarray:
    """Per term, the largest weight any task has (0 for a term no task has)."""
    out = np.zeros(matrix.shape[1], dtype=np.float32)
    counts = np.diff(matrix.indptr)
    present = np.flatnonzero(counts)
    if present.size:
        out[present] = np.maximum.reduceat(matrix.data, matrix.indptr[present])
    return out


def group_max(values: np.ndarray, starts: np.ndarray, size: int, rows: np.ndarray) -> np.ndarray:
    """Per task, the largest of its exemplars' values; -1 for a task without exemplars.
    Exemplars are stored grouped by task: `starts` marks where each non-empty group begins and
    `rows` is the task of each group. With cosines as values this is the nearest-neighbour
    evidence of a task (the 1-NN classifier's score, Cover & Hart 1967):

        nn(q, t) = max_{e in E_t} cos(q, e)

    an absolute quantity, comparable between queries, which the abstention model needs."""
    out = np.full(size, -1.0, dtype=np.float32)
    if values.size:
        out[rows] = np.maximum.reduceat(values, starts)
    return out


# OpenBLAS's single-precision matrix-vector product computes the rows of `A @ x` in blocks of
# this many rows, each row's value independent of where its block lies; the last (rows mod 4)
# rows of a product go through another kernel, whose values depend on the rows before them.
GEMV_BLOCK = 4
# Reading in place costs a call (~3 us) per run of adjacent segments; gathering the rows costs
# their copy. Below this many rows per run on average (many small groups: the large catalog),
# grouped_products gathers (the same values: it is the product it reproduces).
GATHER_BELOW_ROWS_PER_RUN = 20


def grouped_products(vectors: np.ndarray, starts: np.ndarray, ends: np.ndarray, query_vector: np.ndarray,
                     whole: bool = False) -> np.ndarray:
    """The cosines v_e . q of the rows e in the segments [starts_i, ends_i) (sorted, disjoint),
    concatenated, read in place: one product per run of adjacent segments, no copy of the rows
    (unless the runs are short: GATHER_BELOW_ROWS_PER_RUN).
    A nearest-neighbour cascade reads about half of a memory's exemplars; gathering them first
    (`vectors[picked] @ q`) made them cross the memory bus three times (read, write, read).

    The values are those of the gathered product `vectors[picked] @ q`, or with `whole` those of
    the whole product `vectors @ q`, last bit included, with OpenBLAS (GEMV_BLOCK): every run is
    computed over whole blocks (extended by up to three neighbouring rows, whose values are
    dropped), and the product's last (n mod GEMV_BLOCK) rows again after GEMV_BLOCK rows of
    context, as the product computes its tail."""
    total = int((ends - starts).sum())
    out = np.empty(total, dtype=np.result_type(vectors.dtype, query_vector.dtype))
    if total == 0:
        return out
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_starts = starts[np.concatenate(([0], breaks))].tolist()
    run_ends = ends[np.concatenate((breaks - 1, [len(ends) - 1]))].tolist()
    if not whole and total < GATHER_BELOW_ROWS_PER_RUN * len(run_starts):
        lengths = ends - starts
        offsets = np.zeros(len(starts), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return vectors[np.arange(total) + np.repeat(starts - offsets, lengths)] @ query_vector
    size, position = len(vectors), 0
    for start, end in zip(run_starts, run_ends):
        n = end - start
        blocks = -(-n // GEMV_BLOCK) * GEMV_BLOCK
        if blocks == n:
            out[position:position + n] = vectors[start:end] @ query_vector
        elif start + blocks <= size:
            out[position:position + n] = (vectors[start:start + blocks] @ query_vector)[:n]
        else:
            out[position:position + n] = (vectors[max(0, end - blocks):end] @ query_vector)[-n:]
        position += n
    if whole:
        tail = size % GEMV_BLOCK
        if tail and run_ends[-1] > size - tail:   # the selection reaches into the product's tail
            values = (vectors[max(0, size - tail - GEMV_BLOCK):] @ query_vector)[-tail:]
            first = max(run_starts[-1], size - tail)
            out[total - (run_ends[-1] - first):] = values[first - (size - tail):run_ends[-1] - (size - tail)]
        return out
    tail = total % GEMV_BLOCK
    if tail:
        context, picked = min(total, tail + GEMV_BLOCK), []
        for start, end in zip(reversed(run_starts), reversed(run_ends)):   # the selection's last rows
            picked[:0] = range(max(start, end - (context - len(picked))), end)
            if len(picked) == context:
                break
        out[total - tail:] = (vectors[picked] @ query_vector)[-tail:]
    return out


def centroid_vectors(vectors: np.ndarray, task_rows: np.ndarray, n_tasks: int) -> np.ndarray:
    """Per task, the L2-normalised mean of its exemplar vectors: the Rocchio (1971) / nearest-
    centroid prototype, c_t = sum_{e in E_t} v_e / ||sum_{e in E_t} v_e||. Its cosine to the query
    pools all of a task's phrasings: robust where one exemplar alone is noisy. `task_rows[i]` is
    the task of exemplar i; a task without exemplars gets a zero vector."""
    dim = vectors.shape[1] if vectors.ndim == 2 and vectors.size else 0
    sums = np.zeros((n_tasks, dim), dtype=np.float32)
    if dim:
        np.add.at(sums, task_rows, vectors)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return (sums / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def softmax(scores: np.ndarray) -> np.ndarray:
    """p(t | q) = exp(s_t) / sum_u exp(s_u): the conditional-logit (McFadden, 1974) reading of
    the fused score, which is how the fusion weights are fitted (search.fitting)."""
    if scores.size == 0:
        return scores
    shifted = np.exp(scores - scores.max())
    return shifted / shifted.sum()


def fuzzy_corrections(word: str, vocabulary: Sequence[str], min_similarity: float,
                      allow_prefix: bool, limit: int = 3) -> list[tuple[str, float]]:
    """Vocabulary words within edit distance of an unknown query word, with similarity in [0, 1].

    Normalised Indel similarity (rapidfuzz `fuzz.ratio`) >= `min_similarity` catches
    transpositions, drops and doublings ("devlopmental", "imunizations"). With `allow_prefix`
    (the last word of a type-ahead query) a word that starts a vocabulary word also counts
    ("immun" -> "immunizations"), at a similarity of its covered share, floored at 0.7.
    `vocabulary` must be sorted (SearchIndex.surface_words is).
    """
    if len(word) < 3 or word.isdigit():
        return []
    found: dict[str, float] = {}
    for candidate, score, _ in process.extract(word, vocabulary, scorer=fuzz.ratio,
                                               score_cutoff=min_similarity, limit=limit):
        found[candidate] = score / 100.0
    if allow_prefix:
        # `vocabulary` is sorted: the words that start with `word` are one contiguous slice
        completions = list(vocabulary[bisect.bisect_right(vocabulary, word):bisect.bisect_left(vocabulary, word + "\uffff")])
        for candidate in sorted(completions, key=len)[:limit]:
            found[candidate] = max(found.get(candidate, 0.0), max(0.7, len(word) / len(candidate)))
    return sorted(found.items(), key=lambda item: (-item[1], item[0]))[:limit]


def coverage_normalise(scores: np.ndarray, ideal: float) -> np.ndarray:
    """Scale a sparse signal by the query's ideal score: the sum, over the query's words, of the
    best weight any task has for that word (a fixed default for words no task has).

    Unlike per-query max-normalisation, a task matching one weak word of a three-word query
    stays near 1/3 instead of being stretched to 1, so a signal speaks only as loudly as its
    evidence. On the training split's cross-validation this lifted MRR by 0.06 over max-norm.
    """
    return scores / ideal if ideal > 0 else np.zeros_like(scores)


def unique(items: Iterable[str]) -> list[str]:
    """Order-preserving de-duplication (query terms count once each)."""
    return list(dict.fromkeys(items))

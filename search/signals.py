"""The scoring math of the hybrid prefilter, one small function per formula.

Index time turns every signal into a (tasks x terms) weight matrix, so query time is a
column sum: a cheap lookup, in the spirit of bm25s (Lù, 2024). BM25's own pieces (idf, length
normalisation, saturation, BM25F) live in search.bm25.
"""
from __future__ import annotations

import bisect
import functools
import math
from typing import Iterable, Sequence

import numpy as np
from rapidfuzz import fuzz, process
from scipy import sparse

try:   # the float16 screen of the neighbour cascade (half_screen_available); optional
    import simsimd
except ImportError:   # pragma: no cover
    simsimd = None


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


def segment_offsets(lengths: np.ndarray) -> np.ndarray:
    """Where each segment begins when segments of these lengths are concatenated."""
    offsets = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return offsets


def selected_rows(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The rows of the segments [starts_i, starts_i + lengths_i), concatenated: the row behind
    each position of a grouped selection."""
    return np.arange(int(lengths.sum())) + np.repeat(starts - segment_offsets(lengths), lengths)


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
    run_starts, run_ends = _runs(starts, ends)
    if not whole and total < GATHER_BELOW_ROWS_PER_RUN * len(run_starts):
        return vectors[selected_rows(starts, ends - starts)] @ query_vector
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
        out[total - tail:] = _selection_tail(vectors, run_starts, run_ends, total, query_vector)
    return out


def _runs(starts: np.ndarray, ends: np.ndarray) -> tuple[list[int], list[int]]:
    """The runs of adjacent segments [starts_i, ends_i) (sorted, disjoint): (run starts, run ends)."""
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    return (starts[np.concatenate(([0], breaks))].tolist(),
            ends[np.concatenate((breaks - 1, [len(ends) - 1]))].tolist())


def _selection_tail(vectors: np.ndarray, run_starts: list[int], run_ends: list[int], total: int,
                    query_vector: np.ndarray) -> np.ndarray:
    """The values of the gathered product `vectors[picked] @ q` at the selection's last
    (total mod GEMV_BLOCK) rows, which OpenBLAS computes with its tail kernel after
    GEMV_BLOCK rows of context (see GEMV_BLOCK)."""
    tail = total % GEMV_BLOCK
    context, picked = min(total, tail + GEMV_BLOCK), []
    for start, end in zip(reversed(run_starts), reversed(run_ends)):   # the selection's last rows
        picked[:0] = range(max(start, end - (context - len(picked))), end)
        if len(picked) == context:
            break
    return (vectors[picked] @ query_vector)[-tail:]


# --- the half-precision screen of the neighbour cascade -----------------------------------------
# A cascade reads its candidate tasks' exemplars from memory (~10 MB of float32 vectors at 15,000
# cases, more than the cache keeps between queries). A float16 copy (half the bytes, SimSIMD's
# SIMD kernels: numpy has no fast float16 product) finds, per task, the few exemplars that can be
# its nearest; only those are read again in float32. The maxima are the float32 ones, exactly.

#: The unit roundoff of float16 (11-bit significand) and float32.
HALF_ROUNDOFF = 2.0 ** -11
SINGLE_ROUNDOFF = 2.0 ** -24


def half_screen_error(dims: int, max_norm: float) -> float:
    """A bound, per unit of query norm, on |x~ . q~ - fl32(x . q)| for rows x of norm at most
    `max_norm`, x~ and q~ their float16 roundings (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2002, §2.2 and §3.1):

        |x~.q~ - x.q|  <= (2u + u^2) |x|.|q| + s sqrt(d) |q|      (rounding; s: float16's
                                                                    subnormal spacing 2^-24 / 2)
        each float32 sum of d products is within  gamma_d |x|.|q|,  gamma_d = d v / (1 - d v)

    with u = 2^-11, v = 2^-24, |x|.|q| <= |x| |q| (Cauchy-Schwarz); doubled for safety."""
    gamma = dims * SINGLE_ROUNDOFF / (1.0 - dims * SINGLE_ROUNDOFF)
    rounding = (2 * HALF_ROUNDOFF + HALF_ROUNDOFF ** 2) * max_norm + 2.0 ** -25 * math.sqrt(dims)
    return 2.0 * (rounding + 2 * gamma * max_norm)


#: SimSIMD's targets with float16 kernels; elsewhere (its serial fallback) no screen is made.
HALF_KERNELS = ("haswell", "skylake", "ice", "genoa", "sapphire", "turin", "sierra", "neon_f16", "sve_f16")


@functools.lru_cache(maxsize=1)
def half_screen_available() -> bool:
    """Whether SimSIMD is installed and has a float16 kernel for this CPU."""
    if simsimd is None:
        return False
    capabilities = simsimd.get_capabilities()
    return any(capabilities.get(name) for name in HALF_KERNELS)


def half_products(screen: np.ndarray, run_starts: list[int], run_ends: list[int], total: int,
                  query_vector: np.ndarray) -> np.ndarray:
    """The float16 products screen[e] . q~ of the rows of the runs, concatenated (float32): one
    call per run, or one over the gathered rows when the runs are short (as grouped_products)."""
    query = query_vector.astype(np.float16)
    if total < GATHER_BELOW_ROWS_PER_RUN * len(run_starts):
        picked = selected_rows(np.asarray(run_starts), np.subtract(run_ends, run_starts))
        return np.asarray(simsimd.dot(screen[picked], query), dtype=np.float32)
    out = np.empty(total, dtype=np.float32)
    position = 0
    for start, end in zip(run_starts, run_ends):
        out[position:position + end - start] = simsimd.dot(screen[start:end], query)
        position += end - start
    return out


def screened_group_max(vectors: np.ndarray, screen: np.ndarray, error: float, starts: np.ndarray, ends: np.ndarray,
                       query_vector: np.ndarray, keep: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray | None]:
    """Per segment [starts_i, ends_i) (sorted, disjoint, none empty), the largest float32 cosine
    max_e v_e . q, as group_max(grouped_products(...)) gives it, to the last bit; with `keep` (a
    mask over all rows), also the largest over the kept rows of each segment (-1 where none is).

    `screen` is `vectors` in float16 and `error` half_screen_error(...) for them. With a_e the
    screened product and eps = error |q|, |a_e - v_e . q| <= eps; so a row whose a_e is below
    its segment's max a minus 2 eps cannot hold the segment's max (the max's own a is at least
    max - eps, any row's a at most its value + eps). Only the rows that survive are read in
    float32, each in a block of GEMV_BLOCK rows as the gathered product computes it; the
    selection's last (total mod GEMV_BLOCK) rows, which the gathered product computes with its
    tail kernel, are computed as it does (_selection_tail)."""
    lengths = ends - starts
    total = int(lengths.sum())
    run_starts, run_ends = _runs(starts, ends)
    approx = half_products(screen, run_starts, run_ends, total, query_vector)
    offsets = segment_offsets(lengths)
    rows = selected_rows(starts, lengths)                # position in the selection -> row of `vectors`
    window = 2.0 * error * float(np.sqrt(np.dot(query_vector, query_vector)))
    survive = approx >= np.repeat(np.maximum.reduceat(approx, offsets) - window, lengths)
    kept = None
    if keep is not None:
        kept = keep[rows]
        masked = np.where(kept, approx, -np.inf)
        survive |= kept & (masked >= np.repeat(np.maximum.reduceat(masked, offsets) - window, lengths))
    tail = total % GEMV_BLOCK
    if tail:
        survive[total - tail:] = False
    positions = np.flatnonzero(survive)
    picked = rows[positions]
    padded = np.concatenate([picked, np.repeat(picked[-1:], (-picked.size) % GEMV_BLOCK)])
    values = np.full(total, -np.inf, dtype=np.float32)
    values[positions] = (vectors[padded] @ query_vector)[:picked.size]
    if tail:
        values[total - tail:] = _selection_tail(vectors, run_starts, run_ends, total, query_vector)
    best = np.maximum.reduceat(values, offsets)
    if kept is None:
        return best, None
    return best, np.maximum(np.maximum.reduceat(np.where(kept, values, -np.inf), offsets), -1.0)


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

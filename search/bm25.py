"""BM25, once: the formula's pieces as small named functions, and the plain (one-field) builder.

Every BM25 weight of the project is built from these pieces, so one definition of the idf, the
length normalisation and the saturation holds for every index:

    w(t, d) = idf(t) * tf~ / (k1 + tf~)                         (saturate)
    tf~     = tf(t, d) / (1 - b + b * |d| / avgdl)              (length_normalised_tf)
    tf~     = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)   (bm25f_pseudo_tf: BM25F)
    idf(t)  = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))         (lucene_idf)

Sources: Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and Beyond",
eq. 3.15 (BM25) and sec. 3.4 (BM25F, after Robertson, Zaragoza & Taylor 2004); Lucene's
BM25Similarity (the idf, never negative, and no constant (k1 + 1) factor since Lucene 8, which
changes no ranking); bm25s (Lù, 2024), whose "lucene" method is the same formula
(`_score_idf_lucene`, `_score_tfc_lucene`). The functions are plain arithmetic over their
arguments: Python numbers and numpy arrays alike (an array of postings at once).

Who builds with them:
- search.index.analyse_tasks: BM25F over each task's name, aliases, category, help and enrichment
  (the `lexical` signal), per-field b and weights;
- search.exemplars.build_exemplars and search.typed.build_typed_index: `bm25_matrix` over one
  document per task (its text and its cases' queries; stemmed terms, or words as typed);
- kb.index.SparseBM25: the same pieces over a corpus's (documents x terms) frequency matrix.

Where bm25s is used instead (plain BM25 over documents, nothing else asked of it): the evaluation's
`bm25` baseline (evaluation.replay.run_bm25) and the type-ahead baseline
(evaluation.prefix_engine). Why it is not used for the builders above:
- BM25F (the lexical signal): bm25s scores one field; the fields' own b and weights are the point;
- the exemplar and typed matrices: bm25s gives the same weights (within float32 rounding, 1.2e-7
  relative, over the demo's typed words), but keeps its vocabulary and scores inside the
  retriever; read out word by word (`get_scores`), the demo's typed matrix took 90-100 ms against
  4-14 ms for `bm25_matrix`, and both matrices are rebuilt for every index and every
  cross-validation fold. The exemplar matrix's columns are moreover the prefilter's one query
  vocabulary (a stemmed query term is one column index in every signal's matrix);
- kb: injected postings (LLM enrichment, SAGE keywords) are fractional term frequencies that the
  enriched and sage views add to the text's counts; bm25s indexes token lists (whole counts) and
  has no incremental update (kb re-analyses only changed documents). On the plain text view it
  would do: over kb's own tokens of SciFact (train, 809 queries) bm25s gives the same nDCG@10
  (0.6929), Recall@100 (0.9246) and the same top 10 for every query, but scores and sorts a query
  in 0.37 ms against kb's 0.12 ms (medians, on 2 busy cores; ops/bench_kb.py measures both).
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse

#: Lucene BM25Similarity's defaults, used by every builder without a reason of its own (kb uses
#: Pyserini's BEIR parameters, the lexical signal a b per field).
K1 = 1.2
B = 0.75


def lucene_idf(df, n_docs: int):
    """idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)), N documents, df(t) of them holding t.

    Source: Lucene BM25Similarity.idf(); bm25s `_score_idf_lucene`. Always > 0, so a term in
    every document still scores a little (unlike the Robertson-Sparck Jones form rank-bm25 uses,
    negative above N/2). A number for a number, an array for an array."""
    df = np.asarray(df, dtype=np.float64)
    return np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def average_length(lengths) -> float:
    """avgdl: the mean length of the documents that hold any term (Lucene: sumTotalTermFreq /
    docCount, an empty document has no length to average); 1 when none does."""
    lengths = np.asarray(lengths, dtype=np.float64)
    non_empty = lengths[lengths > 0]
    return float(non_empty.mean()) if non_empty.size else 1.0


def length_normalised_tf(tf, length, avg_length: float, b: float):
    """tf~ = tf / (1 - b + b * |d| / avgdl): a (weighted) term frequency, normalised for the
    document's (field's) length; b = 0 ignores length, b = 1 divides by the relative length.

    Source: Robertson & Zaragoza (2009) eq. 3.15 (the B(d) factor); per field in BM25F, sec. 3.4."""
    return tf / (1.0 - b + b * length / avg_length)


def saturate(pseudo_tf, idf, k1: float = K1):
    """w(t, d) = idf(t) * tf~ / (k1 + tf~): the BM25 saturation of a length-normalised (or BM25F
    pseudo) term frequency; 0 where tf~ = 0. Equal to Lucene's idf * tf / (tf + k1 * B(d)).

    Source: Robertson & Zaragoza (2009) eq. 3.15 and sec. 3.4; Lucene BM25Similarity."""
    return idf * pseudo_tf / (k1 + pseudo_tf)


def bm25f_pseudo_tf(field_tfs: Mapping[str, float], field_lengths: Mapping[str, float],
                    avg_lengths: Mapping[str, float], field_weights: Mapping[str, float],
                    field_b: Mapping[str, float]) -> float:
    """BM25F's pseudo term frequency: each field's tf weighted by w_f and length-normalised with
    its own b_f, then summed (saturated once, afterwards, by `saturate`):

        tf~ = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f)

    avglen_f is the field's mean length over all documents (a task without aliases has an alias
    field of length 0). Source: Robertson, Zaragoza & Taylor (2004); Robertson & Zaragoza (2009)
    sec. 3.4."""
    total = 0.0
    for field, tf in field_tfs.items():
        if tf == 0:
            continue
        total += length_normalised_tf(field_weights[field] * tf, field_lengths[field],
                                      max(avg_lengths[field], 1e-9), field_b[field])
    return total


def bm25_weight(tf, length, avg_length: float, df, n_docs: int, k1: float = K1, b: float = B):
    """Plain BM25's w(t, d) from its counts: saturate(length_normalised_tf(tf), lucene_idf(df))."""
    return saturate(length_normalised_tf(tf, length, avg_length, b), lucene_idf(df, n_docs), k1)


def bm25_matrix(documents: Sequence[Mapping[str, float]], columns: Mapping[str, int],
                k1: float = K1, b: float = B) -> sparse.csc_matrix:
    """(documents x len(columns)) float32 BM25 weights of term-count documents ({term: tf}).

    N, df, |d| and avgdl (`average_length`) are the documents' own; a term without a column
    counts in its document's length and in df but gets no posting. An empty document has none."""
    lengths = np.array([sum(document.values()) for document in documents], dtype=np.float64)
    df = Counter(term for document in documents for term in document)
    rows, cols, tfs, dfs = [], [], [], []
    for row, document in enumerate(documents):
        for term, tf in document.items():
            column = columns.get(term)
            if column is not None:
                rows.append(row)
                cols.append(column)
                tfs.append(tf)
                dfs.append(df[term])
    rows_a = np.asarray(rows, dtype=np.int64)
    weights = bm25_weight(np.asarray(tfs, dtype=np.float64), lengths[rows_a], average_length(lengths),
                          np.asarray(dfs, dtype=np.float64), len(documents), k1, b)
    return sparse.csc_matrix((weights.astype(np.float32), (rows_a, np.asarray(cols, dtype=np.int64))),
                             shape=(len(documents), len(columns)))

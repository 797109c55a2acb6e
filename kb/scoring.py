"""BM25 scoring math as small named functions (vectorised over numpy arrays).

Conventions follow Lucene's BM25Similarity (Lucene >= 8, as used by Pyserini/Anserini for
the BEIR BM25 baselines) and bm25s's "lucene" method:

    score(q, D) = sum_{t in q} w_q(t) * idf(t) * tf(t, D) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))

Lucene dropped the constant (k1 + 1) numerator factor in 8.0; it does not change rankings.
Unlike Lucene, document lengths are exact (Lucene stores them lossily in one byte).
"""
from __future__ import annotations

import numpy as np

DEFAULT_K1 = 0.9  # Pyserini BEIR defaults
DEFAULT_B = 0.4


def lucene_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)).

    Source: Lucene BM25Similarity.idf(); bm25s `_calculate_idf_lucene`. Always > 0, so a
    term present in every document still scores a little (unlike Robertson's classic idf).
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def length_norm(doc_len: np.ndarray, avgdl: float, k1: float, b: float) -> np.ndarray:
    """K(D) = k1 * (1 - b + b * |D| / avgdl): the tf saturation constant per document.

    Source: Robertson & Zaragoza (2009) eq. 3.15; Lucene BM25Similarity (its `cache` table).
    """
    avgdl = avgdl if avgdl > 0 else 1.0
    return k1 * (1.0 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl)


def tf_saturation(tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """tf / (tf + K(D)): Lucene's BM25 tf component (no (k1 + 1) factor, Lucene >= 8)."""
    tf = np.asarray(tf, dtype=np.float64)
    return tf / (tf + norm)


def bm25_term_weight(tf, doc_len, avgdl: float, df, n_docs: int, k1: float, b: float):
    """Per-(term, document) BM25 weight = idf(t) * tf / (tf + K(D)); 0 where tf == 0."""
    return lucene_idf(df, n_docs) * tf_saturation(tf, length_norm(doc_len, avgdl, k1, b))


def weighted_query_score(term_doc_weights: dict[str, float], query_weights: dict[str, float]) -> float:
    """score(q, D) = sum_t w_q(t) * bm25_term_weight(t, D): a weighted BM25 query.

    With w_q(t) = count of t in the query this is plain BM25 over a bag of words (Lucene's
    BooleanQuery of TermQuery clauses, which Pyserini's bag-of-words query generator builds).
    Reference implementation for tests; the index applies the same sum as a sparse gather.
    """
    return float(sum(w * term_doc_weights.get(t, 0.0) for t, w in query_weights.items()))

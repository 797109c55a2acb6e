"""search.bm25, the one BM25 of the project: each piece against its hand formula, numbers and arrays
alike, the plain builder against bm25s's "lucene" method, and one definition of `lucene_idf`."""
from __future__ import annotations

import logging
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from search.bm25 import (average_length, bm25_matrix, bm25_weight, bm25f_pseudo_tf, length_normalised_tf,
                         lucene_idf, saturate)

ROOT = Path(__file__).resolve().parents[1]


def test_each_piece_matches_its_hand_formula():
    assert lucene_idf(1, 5) == pytest.approx(math.log(1 + 4.5 / 1.5))
    assert lucene_idf(5, 5) > 0                                   # never negative, even in every document
    assert length_normalised_tf(2, 10, 5.0, 0.75) == pytest.approx(2 / (1 - 0.75 + 0.75 * 2))
    assert length_normalised_tf(2, 10, 5.0, 0.0) == 2             # b = 0: length ignored
    assert saturate(3.0, 2.0, 1.2) == pytest.approx(2.0 * 3.0 / (1.2 + 3.0))
    assert saturate(0.0, 2.0) == 0.0
    pseudo = bm25f_pseudo_tf({"name": 1, "help": 2}, {"name": 2, "help": 10}, {"name": 2.0, "help": 5.0},
                             {"name": 3.0, "help": 1.0}, {"name": 0.3, "help": 0.75})
    assert pseudo == pytest.approx(3.0 * 1 / 1.0 + 1.0 * 2 / (1 - 0.75 + 0.75 * 2))
    # Lucene's form: idf * tf / (tf + k1 * (1 - b + b * |d| / avgdl))
    assert bm25_weight(2, 3, 2.5, 1, 3, 0.9, 0.4) == pytest.approx(
        math.log(1 + 2.5 / 1.5) * 2 / (2 + 0.9 * (1 - 0.4 + 0.4 * 3 / 2.5)))


def test_numbers_and_arrays_give_the_same_weights():
    tf, length, df = np.array([1.0, 2.0, 5.0]), np.array([3.0, 8.0, 20.0]), np.array([1, 4, 9])
    together = bm25_weight(tf, length, 7.0, df, 10)
    one_by_one = [bm25_weight(float(t), float(n), 7.0, int(d), 10) for t, n, d in zip(tf, length, df)]
    assert together.tolist() == one_by_one


def test_average_length_skips_empty_documents():
    assert average_length([2, 0, 4]) == 3.0
    assert average_length([0, 0]) == 1.0 and average_length([]) == 1.0


def test_the_plain_builder_matches_bm25s():
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    corpus = [["cat", "dog", "cat"], ["dog", "fish"], ["fish", "fish", "owl", "cat", "owl"]]
    columns = {w: i for i, w in enumerate(sorted({w for d in corpus for w in d}))}
    ours = bm25_matrix([Counter(d) for d in corpus], columns, k1=1.2, b=0.75).toarray()
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", dtype="float64")
    retriever.index(corpus, show_progress=False)
    for word, column in columns.items():
        assert ours[:, column] == pytest.approx(retriever.get_scores([word]), rel=1e-6)


def test_an_empty_document_has_no_postings_and_no_length():
    with_empty = bm25_matrix([Counter({"a": 2, "b": 1}), Counter({"b": 3}), Counter()], {"a": 0, "b": 1})
    assert with_empty.shape == (3, 2) and not with_empty.toarray()[2].any()
    # its N counts (idf), its length of 0 does not pull avgdl down
    assert with_empty[0, 0] == pytest.approx(bm25_weight(2, 3, 3.0, 1, 3), rel=1e-6)


def test_a_term_without_a_column_still_counts_in_length_and_df():
    documents = [Counter({"a": 1, "b": 3}), Counter({"a": 2})]
    only_a = bm25_matrix(documents, {"a": 0}).toarray()
    both = bm25_matrix(documents, {"a": 0, "b": 1}).toarray()
    assert only_a.shape == (2, 1) and np.array_equal(only_a[:, 0], both[:, 0])


def test_lucene_idf_is_defined_once():
    definition = "def " + "lucene_idf("
    found = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*.py")
             if not any(part.startswith(".") or part == "node_modules" for part in path.relative_to(ROOT).parts)
             and definition in path.read_text(encoding="utf-8")]
    assert found == ["search/bm25.py"]

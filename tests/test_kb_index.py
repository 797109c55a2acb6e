"""kb index: hand-computed BM25, weighted queries, DF tool, n-gram injection, persistence,
incremental updates."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kb.analysis import analyze
from kb.df import df_filter
from kb.index import DocInput, Index
from search.bm25 import bm25_weight

DOCS = [DocInput("d1", "h1", "cat dog cat"), DocInput("d2", "h2", "dog fish"), DocInput("d3", "h3", "fish fish owl")]


def make(docs=DOCS, **kw) -> Index:
    idx = Index(**kw)
    idx.update(docs)
    return idx


def hand_bm25(tf, dl, avgdl, df, n, k1=0.9, b=0.4):
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_weighted_query_matches_hand_computed_bm25():
    idx = make()
    avgdl = (3 + 2 + 3) / 3
    expected = {
        "d1": 1.0 * hand_bm25(2, 3, avgdl, 1, 3),
        "d2": 0.5 * hand_bm25(1, 2, avgdl, 2, 3),
        "d3": 0.5 * hand_bm25(2, 3, avgdl, 2, 3),
    }
    rows, scores = idx.search_weighted({"cat": 1.0, "fish": 0.5}, k=10)
    got = {idx.doc_ids[r]: s for r, s in zip(rows, scores)}
    assert got.keys() == expected.keys()
    for d, v in expected.items():
        assert got[d] == pytest.approx(v, rel=1e-5)
    # ranking: d1 (rare term, weight 1) first; d3 (tf 2) before d2
    assert [idx.doc_ids[r] for r in rows] == ["d1", "d3", "d2"]
    # the one BM25 formula (search.bm25) agrees with the hand formula
    w = bm25_weight(np.array([2.0]), np.array([3.0]), avgdl, np.array([1]), 3, 0.9, 0.4)
    assert float(w[0]) == pytest.approx(hand_bm25(2, 3, avgdl, 1, 3))


def test_unknown_terms_and_empty_query_score_nothing():
    idx = make()
    rows, _ = idx.search_weighted({"zebra": 1.0}, k=5)
    assert len(rows) == 0
    rows, _ = idx.search_weighted({}, k=5)
    assert len(rows) == 0


def test_df_tool_terms_and_phrases():
    idx = make([DocInput("a", "1", "heart attack in winter"), DocInput("b", "2", "attack of a cold heart"),
                DocInput("c", "3", "a heart attack again")])
    assert idx.df("heart") == 3
    assert idx.df("heart attack") == 2          # adjacent only in a and c
    assert idx.df("attack heart") == 0          # positions are over analysed terms (stopwords dropped)
    assert idx.df("cold heart") == 1
    assert idx.df("nonexistent words") == 0
    assert idx.df("") == 0


def test_df_filter_bounds():
    docs = [DocInput(f"d{i}", str(i), ("common " if i < 6 else "") + ("rare" if i == 0 else "filler")) for i in range(10)]
    idx = make(docs)
    res = df_filter(idx, ["common", "rare", "absent term", "Rare"], max_df=0.5, min_df=0)
    kept = dict(res.kept)
    assert kept == {"rare": 1, "absent term": 0}      # common: df 6 > 5
    reasons = dict(res.dropped)
    assert reasons["common"].startswith("df 6 >") and reasons["Rare"] == "duplicate"
    res = df_filter(idx, ["common", "rare", "absent term"], max_df=0.6, min_df=1)
    assert dict(res.kept) == {"common": 6, "rare": 1}  # boundary inclusive; df 0 fails min_df
    res = df_filter(idx, ["rare", "filler"], max_df=1.0, min_df=1, exclude_terms={"rare"})
    assert dict(res.kept) == {"filler": 9} and dict(res.dropped)["rare"] == "already in query"


def test_ngram_injection_adds_postings_not_text():
    idx = make([DocInput("a", "1", "patients after a heart attack"), DocInput("b", "2", "myocardial biopsy results"),
                DocInput("c", "3", "unrelated weather report")])
    seq_before = idx.seq.copy()
    text_before = idx.text_tf.copy()
    stats = idx.set_field("enrich", {"a": [("myocardial infarction", 0.5), ("heart attack", 1.0)]})
    # "heart attack" is already in the text of a: nothing injected for it
    assert "heart_attack" not in idx.vocab
    assert stats == {"docs": 1, "postings": 3}      # myocardi, infarct, myocardi_infarct
    tok = "_".join(analyze("myocardial infarction"))
    assert idx.term_df(tok, "enriched") == 1 and idx.term_df(tok, "text") == 0
    assert idx.df("myocardial infarction", "enriched") == 1
    assert idx.df("myocardial", "enriched") == 2 and idx.df("myocardial", "text") == 1
    # stored text and text statistics unchanged
    assert np.array_equal(idx.seq, seq_before)
    assert (idx.text_tf[:, :text_before.shape[1]] != text_before).nnz == 0
    # the phrase token scores document a in the enriched view only
    rows, _ = idx.search_weighted({tok: 1.0}, k=3, view="enriched")
    assert [idx.doc_ids[r] for r in rows] == ["a"]
    rows, _ = idx.search_weighted({tok: 1.0}, k=3, view="text")
    assert len(rows) == 0
    # weights act as term frequencies
    m = idx.fields["enrich"]
    assert m[0, idx.vocab[tok]] == pytest.approx(0.5)


def test_persistence_round_trip(tmp_path):
    idx = make()
    idx.set_field("enrich", {"d2": [("salmon trout", 1.0)]})
    idx.save(tmp_path / "index")
    back = Index.load(tmp_path / "index")
    assert back.doc_ids == idx.doc_ids and back.terms == idx.terms and back.doc_hashes == idx.doc_hashes
    assert (back.k1, back.b, back.join_compounds) == (idx.k1, idx.b, idx.join_compounds)
    for view in ("text", "enriched"):
        q = {"fish": 1.0, "salmon": 0.7, "cat": 0.2}
        r1, s1 = idx.search_weighted(q, 3, view)
        r2, s2 = back.search_weighted(q, 3, view)
        assert list(r1) == list(r2) and np.allclose(s1, s2)
    assert back.df("salmon trout", "enriched") == 1
    # saving again over an existing index works (atomic swap)
    back.save(tmp_path / "index")
    assert Index.load(tmp_path / "index").n_docs == 3


def test_incremental_update_reanalyses_changed_docs_only():
    idx = make()
    idx.set_field("enrich", {"d1": [("kitten", 1.0)], "d3": [("salmon", 1.0)]})
    stats = idx.update([DocInput("d1", "h1", "cat dog cat"), DocInput("d3", "h3x", "owl owl"),
                        DocInput("d4", "h4", "newt cat")])
    assert stats == {"added": 1, "changed": 1, "unchanged": 1, "removed": 1, "analysed": 2}
    assert idx.doc_ids == ["d1", "d3", "d4"]
    assert idx.df("fish") == 0 and idx.df("owl") == 1 and idx.df("cat") == 2
    # enrichment kept for the unchanged doc, dropped for the changed one
    assert idx.term_df("kitten", "enriched") == 1 and idx.term_df("salmon", "enriched") == 0
    # same result as a fresh build
    fresh = make([DocInput("d1", "h1", "cat dog cat"), DocInput("d3", "h3x", "owl owl"), DocInput("d4", "h4", "newt cat")])
    for q in ({"cat": 1.0}, {"owl": 1.0, "newt": 2.0}):
        r1, s1 = idx.search_weighted(q, 3)
        r2, s2 = fresh.search_weighted(q, 3)
        assert list(r1) == list(r2) and np.allclose(s1, s2)


def test_beir_parity_analysis_variant():
    assert analyze("ASQ-3 score") == ["asq", "3", "asq3", "score"]
    assert analyze("ASQ-3 score", join_compounds=False) == ["asq", "3", "score"]


def test_save_over_an_index_folder_of_an_older_release(tmp_path):
    import shutil

    idx = make()
    idx.save(tmp_path / "published")
    shutil.copytree(tmp_path / "published", tmp_path / "index")  # a plain folder, as older releases wrote
    idx.save(tmp_path / "index")
    assert (tmp_path / "index").is_symlink() and Index.load(tmp_path / "index").n_docs == 3
    idx.save(tmp_path / "index")
    assert len(list(tmp_path.glob("index.v*"))) == 2  # the current version and the one it replaced

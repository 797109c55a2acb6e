"""Prefix evidence for type-ahead (issue 19 item 6): the query's last word is also read as the
start of longer vocabulary words (search.index.prefix_expansion), feeding the exact-term sparse
signals. Measured on prefixes of held-out queries: docs/prefix-search.md (evaluation/prefixes.py)."""
from __future__ import annotations

import pytest

from catalog.records import CaseRecord
from evaluation.prefixes import prefix_cases
from lexicon.rationale import build_lexicon
from search.index import PREFIX_MAX_TERMS, build_index
from search.prefilter import prefilter
from search.query import analyse_query
from settings import Settings

SETTINGS = Settings.from_env({})


@pytest.fixture(scope="module")
def index(demo_tasks, demo_cases):
    return build_index(demo_tasks, build_lexicon(demo_cases), SETTINGS.field_weights, cases=demo_cases)


def top(index, query: str, k: int = 5) -> list[str]:
    """The degraded-mode (no embeddings) ranking: the sparse signals alone."""
    return [item.task.name for item in prefilter(index, query, SETTINGS.degraded_weights, k).ranked]


@pytest.mark.parametrize("typed", ["devel", "develo"])
def test_a_partial_word_finds_the_tasks_of_the_words_it_starts(index, typed):
    assert set(top(index, typed, 2)) == {"Professional Development Hours", "Individual Professional Development Plans"}


def test_two_letters_already_reach_the_words_they_start(index):
    names = top(index, "de")
    assert "Dental Home" in names and "10% Disability Enrollment Monitor" not in names


def test_the_last_word_of_a_longer_query_is_the_prefix(index):
    assert top(index, "developmental scr", 2) == ["45-Day Screening Tracker", "ASQ-3 Screening"]


def test_the_expansion_is_a_weighted_reading_of_one_word(index):
    inverse = {column: term for term, column in index.vocabulary.items()}
    expansion = index.prefix_expansion("devel")
    assert {inverse[c] for c in expansion} == {"develop", "development"}
    assert sum(expansion.values()) == pytest.approx(1.0)
    broad = index.prefix_expansion("de")
    assert len(broad) == PREFIX_MAX_TERMS and sum(broad.values()) == pytest.approx(1.0)
    assert max(broad, key=broad.get) == index.vocabulary["dental"]   # the most used completion leads


def test_whole_words_and_single_letters_are_not_expanded(index):
    assert index.prefix_expansion("immunization") == {}   # a term: matched exactly, as before
    assert index.prefix_expansion("d") == {}
    assert index.prefix_expansion("zzzq") == {}
    only_first = analyse_query(index, "devel screening")   # only the LAST word is a prefix
    assert only_first.prefix == {}


def test_prefix_cases_cut_queries_after_n_characters():
    cases = [CaseRecord(query="developmental screening", gold=("a",)), CaseRecord(query="weather", gold=())]
    assert [c.query for c in prefix_cases(cases, 5)] == ["devel"]
    assert [c.query for c in prefix_cases(cases, None)] == ["developmental screening"]


def test_the_typed_index_is_built_at_the_first_query_that_reads_it_once(demo_tasks, demo_cases, monkeypatch):
    """search.index.SearchIndex.typed: an index build leaves it for later, a submitted query (a test
    case's, a cross-validation fold's, a preview's) never builds it, a query that may still be
    typed builds it once for the index and every copy of it, and it is the index an eager build
    makes."""
    from dataclasses import replace

    import search.index as index_module

    built = []
    real = index_module.build_typed_index
    monkeypatch.setattr(index_module, "build_typed_index", lambda *args: built.append(args) or real(*args))
    index = build_index(demo_tasks, build_lexicon(demo_cases), SETTINGS.field_weights, cases=demo_cases)
    copy = replace(index, category_labels=dict(index.category_labels))
    assert not built
    assert not analyse_query(index, "hearin", typing=False).unfinished
    assert not built
    assert analyse_query(copy, "hearin").unfinished                 # may still be typed: read
    assert len(built) == 1
    assert analyse_query(index, "immuniz").unfinished and top(index, "devel", 2)
    assert len(built) == 1 and index.typed is copy.typed
    eager = real(tuple(demo_tasks), tuple(demo_cases))
    assert index.typed.words == eager.words and (index.typed.matrix != eager.matrix).nnz == 0
    assert index.typed.openings == eager.openings


def test_the_live_index_has_its_typed_index_before_the_first_keystroke(demo_app):
    live = demo_app.extensions["taskfinder"].search.live()
    assert live.index.typed_source is not None and live.index.typed_source.made   # already built

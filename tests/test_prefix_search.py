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

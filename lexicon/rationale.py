"""The rationale lexicon (Eq. 1 of the design paper) built from developer test cases.

    L = {(w, t) : w in tokens(r), t in T_gold, for each test case (q, T_gold, r)}

Each rationale's terms (the same normalised, stemmed terms as everywhere else) are linked to
the case's gold tasks. We also link the case's own query terms: the query is the most direct
evidence of how users phrase a need (switch off with `include_queries=False`; the evaluation
reports both). Out-of-scope cases (empty gold list) contribute nothing.

Each case's query also becomes a *pin*: a later query with exactly the same text (case,
accents and punctuation aside) gets the case's gold tasks first, like a curated query rule.
That makes every test case a passing regression test of the product, and an admin's new case
takes visible effect at once. A case learned from use (catalog.records.CaseRecord.implicit) never
pins: its query links terms like any case, but only a written case is a rule. A pin used to be keyed by the query's set of stemmed, stopword-
free terms; measured on CLINC150 val (lexicon from train), that key fired on 629 in-scope queries
and put a wrong task first on 62 of them (9.9%, three times the fitted ranker's own Hit@1 error
there), because different requests share a term set once stopwords and order are gone. The key
is now the whole normalised text, stopwords and word order included: it fires on 13 val
queries, wrong on none.

The lexicon is a pure function of the test cases, so it is rebuilt whenever they change, and
an evaluation builds it from its training split only.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol

from lexicon.language import CATALOG_LANGUAGE, detect
from lexicon.normalise import normalise
from lexicon.text import stem, terms, words

_PIN_WORD = re.compile(r"[0-9a-z]+")


class Case(Protocol):
    """What the lexicon reads of a test case; catalog.records.CaseRecord is one. A protocol, not
    the record itself: the text pipeline sits below the catalog (tests/test_layers.py), so it
    names the fields it needs instead of importing the catalog's records."""

    @property
    def query(self) -> str: ...

    @property
    def gold(self) -> tuple[str, ...]: ...   # empty: out of scope

    @property
    def rationale(self) -> str: ...

    @property
    def implicit(self) -> bool: ...          # learned from use: links terms, never pins


def pin_key(query: str) -> str:
    """The text a pin is keyed by: every word of the normalised query (stopwords kept, nothing
    stemmed), in order, punctuation dropped: "What's my ASQ-3 score?" -> "what s my asq 3 score"."""
    return " ".join(_PIN_WORD.findall(normalise(query)))


@dataclass(frozen=True)
class RationaleLexicon:
    """term -> {task id -> number of test cases linking them}; plus the surface words seen,
    which join the typo-correction vocabulary."""

    associations: Mapping[str, Mapping[str, int]]
    surface_words: frozenset[str]        # the catalog's language only (the typo vocabulary)
    pins: Mapping[str, tuple[str, ...]]
    # every surface word of the cases -> its term, stemmed in its text's language (lexicon.language)
    surface_terms: Mapping[str, str] = field(default_factory=dict)
    # the terms of the cases written in another language than the catalog's -> that language
    foreign_terms: Mapping[str, str] = field(default_factory=dict)

    def pinned_for(self, query: str) -> tuple[str, ...]:
        """Gold tasks of the test cases whose query is `query` (see `pin_key`)."""
        return self.pins.get(pin_key(query), ())

    def tasks_for(self, term: str) -> Mapping[str, int]:
        return self.associations.get(term, {})

    def __len__(self) -> int:
        return sum(len(tasks) for tasks in self.associations.values())


#: The share of the tasks whose rationales use a word beyond which that word is the prose of
#: rationales, not evidence for a task (SIRA's DF bound, kb/df.py, applied to the lexicon): it
#: links a case's gold only where the case's own query uses it. None: no bound.
PROSE_MAX_DF: float | None = 0.2
#: ... and only counting words used for at least this many tasks (a small catalog's rationales
#: share few words by chance).
PROSE_MIN_TASKS = 5


def prose_terms(cases: Iterable[Case], max_df: float | None = None, min_tasks: int = PROSE_MIN_TASKS
                ) -> frozenset[str]:
    """The terms common to the rationales of more than `max_df` of the tasks that have one
    (and at least `min_tasks` of them): df(w) = |{t : w in the rationale of a case with gold t}|,

        prose(w)  <=>  df(w) > max(max_df * |T_r|, min_tasks - 1)

    where T_r is the set of tasks some rationale is about. "Exact task name", "users say ...",
    "this task": words every rationale writer uses whatever the task."""
    if max_df is None:
        return frozenset()
    tasks_of: dict[str, set[str]] = defaultdict(set)
    described: set[str] = set()
    for case in cases:
        if case.gold and case.rationale:
            described.update(case.gold)
            for term in set(terms(case.rationale)):
                tasks_of[term].update(case.gold)
    bound = max(max_df * len(described), min_tasks - 1)
    return frozenset(term for term, tasks in tasks_of.items() if len(tasks) > bound)


def build_lexicon(cases: Iterable[Case], include_queries: bool = True,
                  max_prose_df: float | None = None) -> RationaleLexicon:
    cases = list(cases)
    prose = prose_terms(cases, PROSE_MAX_DF if max_prose_df is None else max_prose_df)
    links: dict[str, Counter] = defaultdict(Counter)
    surface: set[str] = set()
    pins: dict[str, list[str]] = defaultdict(list)
    surface_terms: dict[str, str] = {}
    foreign_terms: dict[str, str] = {}
    for case in cases:
        if not case.gold:
            continue
        if not case.implicit:   # only a written case pins (an admin's rule)
            key = pin_key(case.query)
            pins[key].extend(g for g in case.gold if g not in pins[key])
        # each text stemmed in its own language (lexicon.language.detect): a Spanish case's words
        # meet a Spanish query's, an English one's the catalog's
        query_language = detect(case.query)
        query_terms = {w: stem(w, query_language) for w in words(case.query, query_language)} \
            if include_queries else {}
        rationale_language = detect(case.rationale) if case.rationale else query_language
        rationale_terms = {w: stem(w, rationale_language) for w in words(case.rationale, rationale_language)}
        for surface_word, term in (*query_terms.items(), *rationale_terms.items()):
            surface_terms.setdefault(surface_word, term)
        for language, found in ((query_language, query_terms), (rationale_language, rationale_terms)):
            if language != CATALOG_LANGUAGE:
                for term in found.values():
                    foreign_terms.setdefault(term, language)
        # only the catalog's language joins the typo vocabulary: no word is corrected into another language's
        surface |= {w for w, lang in ((w, query_language) for w in query_terms) if lang == CATALOG_LANGUAGE}
        surface |= set(rationale_terms) if rationale_language == CATALOG_LANGUAGE else set()
        asked = set(query_terms.values())
        for term in asked | set(rationale_terms.values()):
            if term in prose and term not in asked:
                continue   # the prose of rationales (prose_terms): evidence only in the case's query
            for task_id in case.gold:
                links[term][task_id] += 1
    return RationaleLexicon(associations={t: dict(c) for t, c in links.items()},
                            surface_words=frozenset(surface), surface_terms=surface_terms,
                            foreign_terms=foreign_terms,
                            pins={key: tuple(gold) for key, gold in pins.items() if key})

"""What to offer when a search gives no answer: a few queries to try instead, as a pure function.

When the abstention model finds no confident match (or nothing is visible), the response's
`suggestions` list gives the person somewhere to go, built only from the catalog and what the
prefilter already computed for this query, in this order:

    spelling  the query with its near-certain typos corrected from the catalog's vocabulary
              ("devlopmental scrn" -> "developmental scrn"), when a word changed
    task      the names of the nearest tasks the prefilter found (fused score above the average
              visible task) that the abstention model declined to assert
    topic     the most common categories of the visible tasks, only when nothing above applies

Everything comes from tasks the caller may see (the prefilter ranked only those), so a
suggestion never reveals a restricted task. The widget shows them as clickable queries.

Out-of-scope test cases (no right task) are the developers saying "this query is no task", and
their rationale usually names the task it is not ("Emergency Drills covers severe-weather drills,
not forecasts"). A suggestion never contradicts one (`out_of_scope`: (query, rationale) of each):

    covers    the case's query has the query's words (the same content terms, in any order,
              case and punctuation aside), or those of its spelling suggestion: no task is
              suggested at all, only the spelling or the topics
    about     the case's content terms are a part of the query's, or the other way round
              ("weather tomorrow" and "weather forecast for tomorrow"): no task its rationale
              names (`named_in`) is suggested
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from lexicon.normalise import normalise
from lexicon.text import terms

# A correction is offered only when it is this close (normalised Indel similarity in [0, 1]):
# the same bar as the embedder's in-place typo replacement (search.query.EMBED_CORRECTION_MIN),
# so "harry" is not offered as "carry".
SPELLING_MIN_SIMILARITY = 0.9
SUGGESTION_LIMIT = 4


@dataclass(frozen=True)
class Suggestion:
    text: str
    kind: str          # "spelling" | "task" | "topic"

    def as_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind}


def corrected_query(query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
                    min_similarity: float = SPELLING_MIN_SIMILARITY) -> str | None:
    """The query's words with each near-certain typo replaced by its best correction, or None
    when no word changes."""
    changed = False
    out = []
    for word in query_words:
        found = corrections.get(word) or ()
        if found and found[0][1] >= min_similarity and found[0][0] != word:
            out.append(found[0][0])
            changed = True
        else:
            out.append(word)
    return " ".join(out) if changed else None


def topic_label(category: str) -> str:
    """A category id as a person would type it ("family_services" -> "family services")."""
    return category.replace("_", " ").strip()


def common_topics(categories: Iterable[str | None]) -> list[str]:
    """Categories of the visible tasks, most common first (ties by name)."""
    counts = Counter(topic_label(c) for c in categories if c and topic_label(c))
    return [name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


@lru_cache(maxsize=8192)
def content_terms(text: str) -> frozenset[str]:
    """The stemmed content words of `text` (stopwords, case, punctuation and order aside)."""
    return frozenset(terms(text))


@lru_cache(maxsize=8192)
def _spaced_words(text: str) -> str:
    """" word word ... ": the normalised words of `text`, each between spaces (for whole-word search)."""
    return f" {' '.join(re.findall(r'[0-9a-z]+', normalise(text)))} "


def named_in(rationale: str, task_name: str) -> bool:
    """Whether `rationale` names the task: its name, or its name before a parenthesis
    ("Emergency Drills (Shelter-in-Place/Lockdown)" -> "Emergency Drills"), as whole words."""
    text = _spaced_words(rationale)
    short = task_name.split(" (")[0]
    return any(name.strip() and name in text for name in {_spaced_words(task_name), _spaced_words(short)})


def contradicted(query: str, out_of_scope: Iterable[tuple[str, str]]) -> tuple[bool, tuple[str, ...]]:
    """(whether an out-of-scope case covers `query`, the rationales of the cases about it); see
    the module docstring."""
    mine = content_terms(query)
    if not mine:
        return False, ()
    about = []
    for case_query, rationale in out_of_scope:
        theirs = content_terms(case_query)
        if not theirs:
            continue
        if theirs == mine:
            return True, ()
        if theirs <= mine or mine <= theirs:
            about.append(rationale or "")
    return False, tuple(about)


def suggest(query: str, query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
            nearest: Sequence[tuple[str, float]], visible_categories: Iterable[str | None],
            limit: int = SUGGESTION_LIMIT, out_of_scope: Iterable[tuple[str, str]] = ()) -> list[Suggestion]:
    """Up to `limit` distinct suggestions (see the module docstring). `nearest` holds (task name,
    fused score) of the prefilter's ranking before abstention, best first; a score <= 0 means no
    better than the average visible task, so it is no suggestion. Nothing equal to the query
    itself (ignoring case and spacing) is suggested. `out_of_scope`: (query, rationale) of the
    catalog's out-of-scope test cases; no task they rule out is suggested."""
    spelling = corrected_query(query_words, corrections)
    cases = tuple(out_of_scope)
    covered, rejecting = contradicted(query, cases)
    if spelling and not covered:   # the query meant: "wether forecast" is covered like "weather forecast"
        covered, also = contradicted(spelling, cases)
        rejecting += also
    seen = {" ".join(query.lower().split())}
    out: list[Suggestion] = []

    def add(text: str, kind: str) -> None:
        key = " ".join(text.lower().split())
        if key and key not in seen and len(out) < limit:
            seen.add(key)
            out.append(Suggestion(text, kind))

    if spelling:
        add(spelling, "spelling")
    for name, score in ([] if covered else nearest):
        if score > 0 and not any(named_in(rationale, name) for rationale in rejecting):
            add(name, "task")
    if not out:
        for topic in common_topics(visible_categories):
            add(topic, "topic")
    return out

"""What to offer when a search gives no answer: a few queries to try instead, as a pure function.

When the abstention model finds no confident match (or nothing is visible), the response's
`suggestions` list gives the person somewhere to go, built only from the catalog and what the
prefilter already computed for this query, in this order:

    task      what the product is unsure between: the ranking's own top tasks (the prefilter's
              order before abstention, fused score above the average visible task, at most
              SUGGESTION_LIMIT), which the abstention model declined to assert
    spelling  the query with its near-certain typos corrected from the catalog's vocabulary
              ("devlopmental scrn" -> "developmental scrn"), when a word changed
    topic     the most common categories of the visible tasks, only when nothing above applies

and `empty_state` says which kind of empty it is (issue 43 item 2: say "not sure" where the
product is unsure, "nothing matches" where it is sure): UNSURE when tasks are offered, NOTHING
when none is (no evidence above the bar, or a written out-of-scope case rules them out).

Everything comes from tasks the caller may see (the prefilter ranked only those), so a
suggestion never reveals a restricted task. The widget shows them as clickable chips.

**One voice** (`with_completions`): a refused answer's completions (search.completions: whole
queries the box offers above the empty state, each leading to some tasks) and its task chips
agree. The tasks a completion leads to become the first chips, so the popup never says "no
confident match" under a completion that names a task and then offers other tasks first; a
completion that leads to a task a written out-of-scope case rules out for this query is dropped.

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
from typing import Callable, Collection, Iterable, Mapping, Sequence

from lexicon.frequency import common
from lexicon.normalise import normalise
from lexicon.text import terms

# A correction is offered only when it is this close (normalised Indel similarity in [0, 1]):
# the same bar as the embedder's in-place typo replacement (search.query.EMBED_CORRECTION_MIN),
# so "harry" is not offered as "carry".
SPELLING_MIN_SIMILARITY = 0.9
# At most this many task chips (the ranking's top tasks), besides one spelling chip: the fewest
# that reach every refused in-scope task that 8 chips reach (ops/measure_dead_ends.py,
# docs/prefix-search.md "The empty state is a way forward"). CLINC150 val without written
# negatives, refused in-scope queries (of 132) without their task among the chips: 18 / 13 / 11 /
# 9 / 7 / 7 at 2 / 3 / 4 / 5 / 6 / 8 chips (of the last 7, 5 have no word the ranking reads: "what
# do i need to do"); HINT3's real traffic (of 32): 4 / 2 / 1 / 1 / 1 at 2 to 6.
SUGGESTION_LIMIT = 6
_TOKEN = re.compile(r"[^\W_]+")   # a word as typed, any script
# A task is offered only with a fused score above this (0: the average visible task's). Without
# the bar the same measure finds the same dead ends on both sets (a refused query's top tasks are
# above the average), and a query with no word the ranking reads would be offered arbitrary
# tasks of score 0 instead of "nothing matches".
CANDIDATE_MIN_SCORE = 0.0
TOPIC_LIMIT = 4   # the fallback's topics, as many as before issue 43 item 2 (not re-measured)
UNSURE, NOTHING = "unsure", "nothing"   # empty_state: candidates offered / the product is sure


@dataclass(frozen=True)
class Suggestion:
    text: str
    kind: str          # "spelling" | "task" | "topic"

    def as_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind}


def spelling_changes(query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
                     min_similarity: float = SPELLING_MIN_SIMILARITY,
                     readable: Callable[[str], bool] | None = None) -> dict[str, str]:
    """Each near-certain typo of the query's words -> its best correction. With `readable`
    (whether a word reads as one: the tasks' own or a common word of a supported language, as
    the why line judges it: search.prefilter.readable), a word that reads as one is never
    changed ("deliver" is no typo of "delivery") and nothing is changed into a word that does
    not (a test case's deliberate typo: "available" -> "availble"). Measured on HINT3's refused
    real queries: 15 of the 19 spelling chips changed a right word or wrote a typo before."""
    changes = {}
    for word in query_words:
        found = corrections.get(word) or ()
        if not found or found[0][1] < min_similarity or found[0][0] == word:
            continue
        if readable is not None and (readable(word) or not readable(found[0][0])):
            continue
        changes[word] = found[0][0]
    return changes


def corrected_query(query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
                    min_similarity: float = SPELLING_MIN_SIMILARITY, query: str | None = None,
                    readable: Callable[[str], bool] | None = None) -> str | None:
    """The query with each near-certain typo replaced by its best correction (spelling_changes),
    or None when no word changes: `query` as typed, its other words and stopwords kept ("Can u
    delivr to mumbai" -> "Can u deliver to mumbai"), else (or when a changed word is not one of
    its tokens as written) the query's words joined."""
    changes = spelling_changes(query_words, corrections, min_similarity, readable)
    if not changes:
        return None
    return (respelled(query, changes) if query is not None else None) or \
        " ".join(changes.get(word, word) for word in query_words)


def respelled(query: str, changes: Mapping[str, str]) -> str | None:
    """`query` with each token whose normalised form is a key of `changes` replaced by its value,
    everything else as typed; None when some changed word is none of its tokens."""
    done: set[str] = set()

    def swap(match: re.Match) -> str:
        key = normalise(match.group(0))
        if key in changes:
            done.add(key)
            return changes[key]
        return match.group(0)

    text = _TOKEN.sub(swap, query)
    return " ".join(text.split()) if done == set(changes) else None


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


def ruled_out(query: str, spelling: str | None, out_of_scope: Iterable[tuple[str, str]]) -> Callable[[str], bool]:
    """Whether a task (by name) may not be offered for `query`: every task when an out-of-scope
    case covers the query (or its spelling suggestion, what it meant: "wether forecast" is
    covered like "weather forecast"), else the tasks named by the rationales of the cases about
    it (see the module docstring)."""
    cases = tuple(out_of_scope)
    covered, rejecting = contradicted(query, cases)
    if spelling and not covered:
        covered, also = contradicted(spelling, cases)
        rejecting += also
    if covered:
        return lambda name: True
    return lambda name: any(named_in(rationale, name) for rationale in rejecting)


def suggest(query: str, query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
            nearest: Sequence[tuple[str, float]], visible_categories: Iterable[str | None],
            limit: int = SUGGESTION_LIMIT, out_of_scope: Iterable[tuple[str, str]] = (),
            min_score: float = CANDIDATE_MIN_SCORE, known_words: Collection[str] | None = None
            ) -> list[Suggestion]:
    """Up to `limit` task suggestions, then the spelling one, else up to TOPIC_LIMIT topics (see the
    module docstring). `nearest` holds (task name, fused score) of the prefilter's ranking before
    abstention, best first; a score <= `min_score` (0: no better than the average visible task)
    is no suggestion. Nothing equal to the query itself (ignoring case and spacing) is suggested.
    `out_of_scope`: (query, rationale) of the catalog's out-of-scope test cases; no task they
    rule out is suggested. `known_words`: the tasks' own words (SearchIndex.text_words); with
    them a spelling chip changes only words that read as no word (spelling_changes)."""
    readable = None if known_words is None else (lambda word: word in known_words or common(word))
    spelling = corrected_query(query_words, corrections, query=query, readable=readable)
    excluded = ruled_out(query, spelling, out_of_scope)
    seen = {_key(query)}
    tasks: list[Suggestion] = []
    for name, score in nearest:
        if len(tasks) < limit and score > min_score and _key(name) not in seen and not excluded(name):
            seen.add(_key(name))
            tasks.append(Suggestion(name, "task"))
    out = [*tasks, *([Suggestion(spelling, "spelling")] if spelling and _key(spelling) not in seen else [])]
    if not out:
        out = [Suggestion(topic, "topic") for topic in common_topics(visible_categories)
               if _key(topic) not in seen][:TOPIC_LIMIT]
    return out


def _key(text: str) -> str:
    """What makes two suggestions (or a suggestion and the query) the same: case and spacing aside."""
    return " ".join(text.lower().split())


def empty_state(results: Sequence, suggestions: Iterable[Mapping]) -> str | None:
    """What kind of empty a response is: None when it has results; UNSURE when its suggestions
    offer tasks (what the product is unsure between); NOTHING when they offer none (the product
    is sure no task matches: no evidence above the bar, or a written case rules them out)."""
    if results:
        return None
    return UNSURE if any(s.get("kind") == "task" for s in suggestions) else NOTHING


def with_completions(query: str, suggestions: Sequence[Mapping], completions: Sequence[tuple[Mapping, Sequence[str]]],
                     out_of_scope: Iterable[tuple[str, str]] = (), limit: int = SUGGESTION_LIMIT
                     ) -> tuple[list[dict], list[dict]]:
    """A refused answer's (suggestions, completions) speaking with one voice (module docstring).
    `completions`: each offered completion (its response dict) with the names of the tasks it
    leads to, in the order offered. A completion leading to a task `out_of_scope` rules out for
    this query is dropped; the tasks the others lead to come first among the task chips, in
    their order (a completion's own tasks in the ranking's), then the answer's own task chips in the ranking's order, at most `limit` tasks;
    then the spelling chip; topics only when no task is offered."""
    spelling = next((s["text"] for s in suggestions if s.get("kind") == "spelling"), None)
    excluded = ruled_out(query, spelling, out_of_scope)
    kept = [(completion, names) for completion, names in completions if not any(excluded(n) for n in names)]
    own = [s["text"] for s in suggestions if s.get("kind") == "task"]
    rank = {_key(name): position for position, name in enumerate(own)}
    led = [name for _, names in kept for name in sorted(names, key=lambda n: (rank.get(_key(n), len(own)), n))]
    seen = {_key(query)}
    tasks: list[dict] = []
    for name in [*led, *own]:
        if len(tasks) < limit and _key(name) not in seen:
            seen.add(_key(name))
            tasks.append(Suggestion(name, "task").as_dict())
    rest = [dict(s) for s in suggestions if s.get("kind") != "task" and (s.get("kind") != "topic" or not tasks)]
    return [*tasks, *rest], [dict(completion) for completion, _ in kept]

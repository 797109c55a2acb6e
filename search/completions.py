"""Query completions: whole queries to offer under the search box while a person types, as pure
functions over the catalog and the popular searches, precomputed once per live index.

**Sources** (each a `Candidate`: a text, its source, a weight, and the tasks a caller must all be
allowed to see before it is offered):

    task    the name and every alias of each task                    (weight 1; needs that task)
    case    the query of each written test case with gold tasks      (weight 1 per case; needs every
            (an out-of-scope case, gold [], is an off-topic query)    gold task)
    search  a query of the search log that results were clicked for  (weight: its distinct clicking
            by at least COMPLETION_MIN_SESSIONS distinct sessions     sessions; needs every task
            (`popular_searches`), and whose latest logged answer was   clicked from it)
            not "no confident match" (`still_answered`)

A suggestion longer than MAX_COMPLETION_CHARS is none (a query to type, not a sentence to read:
the natural-language test cases are written as whole questions). A case or search whose words read as misspellings of the catalog's words (`misspelt`: a word the
task texts do not have, as close to one they have as the no-answer spelling offer requires) is
never offered: the test cases hold typos on purpose ("imunizations"), and a completion teaches the
spelling people then search with.

**Visibility**, per set of visible roles (what /api/search computes: the caller's verified roles,
narrowed by `role`, serving.service.SearchService.visible_roles): a candidate is offered only when
the caller may see every task it needs (catalog.records.TaskRecord.visible_to), and only when none
of its words is a word of a task the caller may not see that no task they may see has anywhere in
its text (`hidden_stems`). So a restricted task's name, a case about it, or a popular search that
led to it never reaches a caller outside its roles.

**Matching** (`CompletionView.lookup`): with the product's own text pipeline (lexicon.text), each
typed word must be a prefix of some word of the suggestion (the last one is usually still being
typed), ignoring case and accents; a stopword still being typed counts as a prefix ("im" of
"immunization"). Nothing equal to what was typed is offered (`normalise_query` of both).

**Order** (`ranked_entries`): candidates with the same `normalise_query` text are one suggestion;
its popularity is (distinct clicking sessions, written cases with that text, task names and
aliases with it), compared in that order, highest first; ties alphabetically. The suggestion is
labelled with the strongest source it has (search, then case, then task) and written as the
catalog writes it when a task or case has it ("ASQ-3 Screening"), else as the log keeps it.

**Cost**: `Completions` builds the candidates once per live index and popular-search refresh; each
set of visible roles gets a `CompletionView` (the anonymous one at once, others on first use, the
ROLE_VIEWS most recent kept): the ranked suggestions and a sorted (word, rank) list, so a keystroke
is a bisect per typed word and a walk over the best-ranked matches (microseconds).
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from rapidfuzz import process
from rapidfuzz.distance import Indel

from catalog.records import CaseRecord, TaskRecord
from lexicon.text import STOPWORDS, normalise, normalise_query, stem, words
from search.lru import LRU
from search.suggestions import SPELLING_MIN_SIMILARITY

SOURCES = ("search", "case", "task")   # strongest first: the parts of the popularity score, in order
COMPLETION_LIMIT = 5
MAX_COMPLETION_CHARS = 60
MIN_SESSIONS_FLOOR = 2    # whatever the setting, one session's query is never offered to anyone
ROLE_VIEWS = 64           # per Completions: views of distinct visible-role sets kept
_PLAIN_TOKEN = re.compile(r"[0-9a-z]+")
_LAST_TOKEN = re.compile(r"([0-9a-z]+)$")
_PAST_EVERY_WORD = "\U0010ffff"   # sorts after any character a word can have


@dataclass(frozen=True)
class Completion:
    text: str
    source: str          # "search" | "case" | "task"

    def as_dict(self) -> dict:
        return {"text": self.text, "source": self.source}


@dataclass(frozen=True)
class PopularSearch:
    """A logged query that results were clicked for by `sessions` distinct sessions."""

    query: str                    # normalised, as the search log keeps it
    sessions: int
    clicked: tuple[str, ...]      # the tasks those clicks opened, sorted


@dataclass(frozen=True)
class Candidate:
    text: str
    source: str
    weight: int
    needs: tuple[TaskRecord, ...]   # the caller must be allowed to see every one of these

    def visible_to(self, roles: frozenset[str]) -> bool:
        return all(task.visible_to(roles or None) for task in self.needs)


@dataclass(frozen=True)
class Entry:
    """One suggestion of a view: its dedupe key, how it is written, its source and popularity."""

    key: str
    text: str
    source: str
    score: tuple[int, int, int]     # (search sessions, cases, task names and aliases)


# -- text -----------------------------------------------------------------------------------------
def typed_words(query: str) -> list[str]:
    """The words a typed query must match: `words(query)` (stopwords dropped, compounds split and
    joined), plus its last token when it reaches the end of the text and `words` dropped it as a
    stopword: it may be the start of a longer word ("im" of "immunization")."""
    found = words(query)
    last = _LAST_TOKEN.search(normalise(query))
    if last and last.group(1) in STOPWORDS and last.group(1) not in found:
        found.append(last.group(1))
    return found


def suggestion_words(text: str) -> frozenset[str]:
    """The words a suggestion can be found by: `words(text)` and every plain token of it,
    stopwords included (so that a typed "in" can reach "in" or "infant")."""
    return frozenset(words(text)) | frozenset(_PLAIN_TOKEN.findall(normalise(text)))


def text_stems(text: str) -> set[str]:
    return {stem(word) for word in words(text)}


def task_texts(task: TaskRecord) -> tuple[str, ...]:
    """Everything a task shows about itself: name, aliases, help, category."""
    return (task.name, *task.aliases, task.help, (task.category or "").replace("_", " "))


# -- sources --------------------------------------------------------------------------------------
def popular_searches(clicks: Iterable[tuple[str, str | None, str, Sequence[str]]],
                     min_sessions: int) -> tuple[PopularSearch, ...]:
    """The queries clicked by at least `min_sessions` distinct sessions (never fewer than
    MIN_SESSIONS_FLOOR), from `clicks`: (query, session, clicked task, the ids the search showed)
    of each click bound to its search. A click counts only with a session and on a task the search
    showed (analytics.formulas binds events the same way); a query nobody clicked never appears."""
    floor = max(min_sessions, MIN_SESSIONS_FLOOR)
    sessions: dict[str, set[str]] = defaultdict(set)
    clicked: dict[str, set[str]] = defaultdict(set)
    for query, session, task_id, shown in clicks:
        if session and query and task_id in shown:
            sessions[query].add(session)
            clicked[query].add(task_id)
    return tuple(PopularSearch(query, len(who), tuple(sorted(clicked[query])))
                 for query, who in sorted(sessions.items()) if len(who) >= floor)


def still_answered(popular: Iterable[PopularSearch], unanswered: Collection[str]) -> tuple[PopularSearch, ...]:
    """The popular searches minus those whose latest logged search answered "no confident match"
    (the product now takes them for off-topic)."""
    return tuple(p for p in popular if p.query not in unanswered)


def task_candidates(tasks: Iterable[TaskRecord]) -> list[Candidate]:
    return [Candidate(text, "task", 1, (task,)) for task in tasks for text in (task.name, *task.aliases)
            if text.strip()]


def case_candidates(cases: Iterable[CaseRecord], tasks: Mapping[str, TaskRecord]) -> list[Candidate]:
    """Written cases with gold tasks, all of them in the catalog."""
    return [Candidate(case.query, "case", 1, tuple(tasks[g] for g in case.gold)) for case in cases
            if case.gold and not case.implicit and case.query.strip() and all(g in tasks for g in case.gold)]


def search_candidates(popular: Iterable[PopularSearch], tasks: Mapping[str, TaskRecord]) -> list[Candidate]:
    """Popular searches whose clicked tasks are all still in the catalog (a task since removed
    cannot say who may see the query that led to it)."""
    return [Candidate(p.query, "search", p.sessions, tuple(tasks[t] for t in p.clicked)) for p in popular
            if p.clicked and all(t in tasks for t in p.clicked)]


class Vocabulary:
    """The catalog's own words (every task's texts), to tell a misspelling from a word."""

    def __init__(self, tasks: Iterable[TaskRecord]):
        found = {word for task in tasks for text in task_texts(task) for word in words(text)}
        self.stems = frozenset(stem(word) for word in found)
        self.words = tuple(sorted(found))
        self._verdicts: dict[str, bool] = {}

    def misspelt(self, text: str) -> bool:
        """Some word of `text` is not the catalog's (by stem) and is within the spelling offer's
        similarity (search.suggestions.SPELLING_MIN_SIMILARITY, normalised Indel) of one that is."""
        return any(self._misspelt_word(word) for word in words(text))

    def _misspelt_word(self, word: str) -> bool:
        verdict = self._verdicts.get(word)
        if verdict is None:
            verdict = stem(word) not in self.stems and process.extractOne(
                word, self.words, scorer=Indel.normalized_similarity, score_cutoff=SPELLING_MIN_SIMILARITY) is not None
            self._verdicts[word] = verdict
        return verdict


def candidates(tasks: Sequence[TaskRecord], cases: Iterable[CaseRecord],
               popular: Iterable[PopularSearch]) -> tuple[Candidate, ...]:
    """Every candidate of the three sources up to MAX_COMPLETION_CHARS long; cases and searches
    only without misspellings."""
    by_id = {task.id: task for task in tasks}
    vocabulary = Vocabulary(tasks)
    written = [c for c in (*case_candidates(cases, by_id), *search_candidates(popular, by_id))
               if len(c.text) <= MAX_COMPLETION_CHARS and not vocabulary.misspelt(c.text)]
    return (*(c for c in task_candidates(tasks) if len(c.text) <= MAX_COMPLETION_CHARS), *written)


# -- visibility and order -------------------------------------------------------------------------
def hidden_stems(tasks: Iterable[TaskRecord], roles: frozenset[str]) -> frozenset[str]:
    """Stems of the names and aliases of the tasks `roles` may not see that appear nowhere in the
    texts of the tasks they may see: words that would tell of a task hidden from them."""
    hidden, shown = set(), set()
    for task in tasks:
        if task.visible_to(roles or None):
            for text in task_texts(task):
                shown |= text_stems(text)
        else:
            for text in (task.name, *task.aliases):
                hidden |= text_stems(text)
    return frozenset(hidden - shown)


def visible_candidates(found: Iterable[Candidate], tasks: Iterable[TaskRecord],
                       roles: frozenset[str]) -> list[Candidate]:
    """The candidates `roles` may see (see the module docstring: Visibility)."""
    secret = hidden_stems(tasks, roles)
    return [c for c in found if c.visible_to(roles) and not (secret and text_stems(c.text) & secret)]


def ranked_entries(found: Iterable[Candidate]) -> list[Entry]:
    """One entry per distinct `normalise_query` text, most popular first (see the module
    docstring: Order)."""
    score: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    written: dict[str, dict[str, str]] = defaultdict(dict)
    for candidate in found:
        key = normalise_query(candidate.text)
        if not key:
            continue
        score[key][SOURCES.index(candidate.source)] += candidate.weight
        written[key].setdefault(candidate.source, " ".join(candidate.text.split()))
    entries = []
    for key, parts in score.items():
        source = next(s for s, weight in zip(SOURCES, parts) if weight > 0)
        text = next(written[key][s] for s in reversed(SOURCES) if s in written[key])
        entries.append(Entry(key, text, source, (parts[0], parts[1], parts[2])))
    entries.sort(key=lambda e: (-e.score[0], -e.score[1], -e.score[2], e.key))
    return entries


# -- lookup ---------------------------------------------------------------------------------------
class CompletionView:
    """The ranked suggestions one set of visible roles may see, and every (word, rank) pair of
    them sorted by word: the suggestions with a word starting with p are the ranks of the pairs
    between bisect(p) and bisect(p + the last character)."""

    def __init__(self, entries: Sequence[Entry]):
        self.entries = tuple(entries)
        self.entry_words = tuple(suggestion_words(e.text) for e in self.entries)
        pairs = sorted((word, rank) for rank, found in enumerate(self.entry_words) for word in found)
        self.words = [word for word, _ in pairs]
        self.ranks = [rank for _, rank in pairs]

    def _span(self, prefix: str) -> tuple[int, int]:
        return bisect_left(self.words, prefix), bisect_left(self.words, prefix + _PAST_EVERY_WORD)

    def lookup(self, typed: Sequence[str], exclude: str = "", limit: int = COMPLETION_LIMIT) -> list[Completion]:
        """The best `limit` suggestions each of whose `typed` words prefixes one of its words,
        best first, without the one whose key is `exclude`. The rarest typed word picks the
        candidates (one bisect each); the others are checked on each candidate's own words."""
        prefixes = sorted(set(typed))
        if not prefixes or limit <= 0:
            return []
        spans = {prefix: self._span(prefix) for prefix in prefixes}
        driver = min(prefixes, key=lambda p: spans[p][1] - spans[p][0])
        start, end = spans[driver]
        others = [p for p in prefixes if p != driver]
        found: list[Completion] = []
        for rank in sorted(set(self.ranks[start:end])):
            entry = self.entries[rank]
            if entry.key == exclude or not all(any(w.startswith(p) for w in self.entry_words[rank]) for p in others):
                continue
            found.append(Completion(entry.text, entry.source))
            if len(found) == limit:
                break
        return found


class Completions:
    """The completions of one catalog (tasks, written cases) and one read of the popular
    searches, with a view per set of visible roles (the anonymous one built at once)."""

    def __init__(self, tasks: Sequence[TaskRecord], cases: Iterable[CaseRecord],
                 popular: Iterable[PopularSearch] = (), views: int = ROLE_VIEWS):
        self.tasks = tuple(tasks)
        self.candidates = candidates(self.tasks, cases, popular)
        self._views: LRU[CompletionView] = LRU(views)
        self.view(frozenset())

    def view(self, roles: frozenset[str]) -> CompletionView:
        """The view of `roles` (visible roles, as serving.service computes them), built on first use."""
        view = self._views.get(roles)
        if view is None:
            view = CompletionView(ranked_entries(visible_candidates(self.candidates, self.tasks, roles)))
            self._views.put(roles, view)
        return view

    def complete(self, query: str, roles: frozenset[str] = frozenset(),
                 limit: int = COMPLETION_LIMIT) -> list[Completion]:
        """Up to `limit` completions of `query` for a caller who may see `roles`."""
        return self.view(frozenset(roles)).lookup(typed_words(query), normalise_query(query), limit)

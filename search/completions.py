"""Query completions: whole queries to offer under the search box while a person types, as pure
functions over the catalog and the popular searches, precomputed once per live index.

**Sources** (each a `Candidate`: a text, its source, a weight, and the tasks a caller must all be
allowed to see before it is offered):

    task    the name and every alias of each task                    (weight 1; needs that task)
    case    the query of each written test case with gold tasks      (weight 1 per case; needs every
            (an out-of-scope case, gold [], is an off-topic query)    gold task)
    search  a query of the search log that at least                   (weight: its distinct verified
            COMPLETION_MIN_PEOPLE distinct verified people searched    people; needs every task
            and clicked a result it showed, each of them at least      clicked from it, by anyone)
            COMPLETION_SETTLE_S ago (`popular_searches`), and whose
            latest logged answer was not "no confident match"
            (`still_answered`)

**A voice is a person** (issue 42). A crowd completion is offered to everyone, so it must be
something several people typed, never one person's query (planted, or private: "dental exam for
jayden smith"). The unit is the verified person (a role token's `sub`, or the trusted proxy's
user header: the search log's `person`, a keyed 8-bit pseudonym, so distinct pseudonyms are
distinct people and counting them never overcounts). Sessions, browser tabs and networks cost an
attacker nothing and count for nothing here: anonymous clicks never create a completion, however
many. At least MIN_PEOPLE_FLOOR (3) people whatever the setting: k-anonymity with k >= 3, 5 by
default. Each person counts only once their first qualifying click is COMPLETION_SETTLE_S old
(`crowd_queries`), so a query an admin does not want is seen coming (the admin's completions
page lists it) and blocked before anyone is offered it. A crowd query's words need not be the
catalog's: k people typed them (the misspelling rule below still applies).

**Exclusions** (`Exclusions`, an admin's, admin.completions): a blocked text (its
`normalise_query` key) and any suggestion with a blocked word (by normalised word or its stem,
`suggestion_words`) are never offered, whatever their source (task names and aliases, cases,
searches).

A suggestion longer than MAX_COMPLETION_CHARS is none (a query to type, not a sentence to read:
the natural-language test cases are written as whole questions). A case or search with a word
that is neither the catalog's own (as written) nor a common word of a supported language
(`Vocabulary.misspelt`, lexicon.frequency) is never offered: the test cases hold typos on purpose
("attendence", "dentel exam"), and a completion teaches the spelling people then search with.

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
its popularity is (distinct clicking people, written cases with that text, task names and
aliases with it), compared in that order, highest first; ties alphabetically. The suggestion is
labelled with the strongest source it has (search, then case, then task) and written as the
catalog writes it when a task or case has it ("ASQ-3 Screening"), else as the log keeps it.

**Cost**: `Completions` builds the candidates once per live index, popular-search refresh and
exclusions change; each
set of visible roles gets a `CompletionView` (the anonymous one at once, others on first use, the
ROLE_VIEWS most recent kept): the ranked suggestions and a sorted (word, rank) list, so a keystroke
is a bisect per typed word and a walk over the best-ranked matches (microseconds).
"""
from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Collection, Iterable, Mapping, NamedTuple, Sequence

from catalog.records import CaseRecord, TaskRecord
from lexicon.frequency import common
from lexicon.language import CATALOG_LANGUAGE, STOPWORDS, detect
from lexicon.normalise import normalise
from lexicon.text import normalise_query, stem, words
from search.lru import LRU

SOURCES = ("search", "case", "task")   # strongest first: the parts of the popularity score, in order
COMPLETION_LIMIT = 5
MAX_COMPLETION_CHARS = 60
MIN_PEOPLE_FLOOR = 3      # whatever the setting, a crowd completion needs this many verified people
MAX_BLOCKED_WORD_CHARS = 64
ROLE_VIEWS = 64           # per Completions: views of distinct visible-role sets kept
_PLAIN_TOKEN = re.compile(r"[0-9a-z]+")
_TOKEN = re.compile(r"[^\W_]+")   # a word as written, any script, accents kept
_LAST_TOKEN = re.compile(r"([0-9a-z]+)$")
_PAST_EVERY_WORD = "\U0010ffff"   # sorts after any character a word can have


@dataclass(frozen=True)
class Completion:
    text: str
    source: str          # "search" | "case" | "task"
    tasks: frozenset[str] = frozenset()   # the tasks it leads to (not shown: one per task, lookup)
    language: str = CATALOG_LANGUAGE      # the language it is written in (the widget marks it: `lang`)

    def as_dict(self) -> dict:
        return {"text": self.text, "source": self.source, "language": self.language}


@dataclass(frozen=True)
class PopularSearch:
    """A logged query that `people` distinct verified people searched and clicked a result of."""

    query: str                    # normalised, as the search log keeps it
    people: int
    clicked: tuple[str, ...]      # the tasks clicks from it opened (anyone's), sorted


class Click(NamedTuple):
    """A click bound to its search (analytics.store.AnalyticsStore.clicked_searches)."""

    query: str                    # the search's, normalised
    person: str | None            # the search's verified person (pseudonym), None: anonymous
    task_id: str                  # the task clicked
    shown: tuple[str, ...]        # the task ids the search showed
    at: datetime                  # the (first such) click's time


@dataclass(frozen=True)
class CrowdQuery:
    """A logged query verified people clicked a result of: `people` of them settled (their first
    click at least the settle time old), `waiting` more not yet."""

    query: str
    people: int
    waiting: int
    clicked: tuple[str, ...]
    settles_at: datetime | None   # when the next waiting person counts (None: nobody waits)


class Exclusions:
    """What an admin blocked (admin.completions): whole suggestions by `completion_key`, and words
    by `blocked_word_key`; a suggestion with a blocked word, or its stem, is never offered."""

    def __init__(self, texts: Iterable[str] = (), words_: Iterable[str] = ()):
        self.texts = frozenset(texts)
        self.words = frozenset(words_)
        self.stems = frozenset(stem(word) for word in self.words)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Exclusions) and (self.texts, self.words) == (other.texts, other.words)

    def __hash__(self) -> int:
        return hash((self.texts, self.words))

    def __repr__(self) -> str:
        return f"Exclusions(texts={sorted(self.texts)}, words={sorted(self.words)})"

    def excludes(self, text: str) -> bool:
        if completion_key(text) in self.texts:
            return True
        if not self.words:
            return False
        found = suggestion_words(text)
        return bool(found & self.words) or any(stem(word) in self.stems for word in found)


NO_EXCLUSIONS = Exclusions()


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
    score: tuple[int, int, int]     # (search people, cases, task names and aliases)
    tasks: frozenset[str] = frozenset()   # the ids of the tasks its candidates lead to
    language: str = CATALOG_LANGUAGE      # the language it is written in (lexicon.language.detect)


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


def completion_key(text: str) -> str:
    """What makes two suggestions one (and what a block names): `normalise_query` of the text."""
    return normalise_query(text)


def blocked_word_key(word: str) -> str | None:
    """A word of the blocklist as suggestions are matched against it: its plain tokens joined
    ("ASQ-3" -> "asq3", as `words` joins a compound), or None when it is not one word of at most
    MAX_BLOCKED_WORD_CHARS."""
    tokens = _PLAIN_TOKEN.findall(normalise(word))
    key = "".join(tokens)
    if not key or len(key) > MAX_BLOCKED_WORD_CHARS or len(word.split()) != 1:
        return None
    return key


def text_stems(text: str) -> set[str]:
    return {stem(word) for word in words(text)}


def task_texts(task: TaskRecord) -> tuple[str, ...]:
    """Everything a task shows about itself: name, aliases, help, category."""
    return (task.name, *task.aliases, task.help, (task.category or "").replace("_", " "))


# -- sources --------------------------------------------------------------------------------------
def crowd_queries(clicks: Iterable[Click], settled_before: datetime) -> tuple[CrowdQuery, ...]:
    """Per query, the distinct verified people who clicked a task the search showed: settled
    (their first such click at or before `settled_before`) and waiting. Anonymous clicks (no
    person) count for nobody, however many sessions, tabs or networks sent them; a click on a task
    the search did not show counts for nothing. `clicked`: every shown task clicked from the query,
    by anyone (the visibility rule needs them all)."""
    first: dict[str, dict[str, datetime]] = defaultdict(dict)
    clicked: dict[str, set[str]] = defaultdict(set)
    for click in clicks:
        if not click.query or click.task_id not in click.shown:
            continue
        clicked[click.query].add(click.task_id)
        if click.person:
            seen = first[click.query].get(click.person)
            if seen is None or click.at < seen:
                first[click.query][click.person] = click.at
    found = []
    for query, people in sorted(first.items()):
        settled = sum(at <= settled_before for at in people.values())
        waiting = sorted(at for at in people.values() if at > settled_before)
        found.append(CrowdQuery(query, settled, len(waiting), tuple(sorted(clicked[query])),
                                waiting[0] if waiting else None))
    return tuple(found)


def min_people(setting: int) -> int:
    """The people a crowd completion needs: the setting, never under MIN_PEOPLE_FLOOR."""
    return max(setting, MIN_PEOPLE_FLOOR)


def popular_searches(crowd: Iterable[CrowdQuery], least: int) -> tuple[PopularSearch, ...]:
    """The crowd queries with at least `least` settled people (never fewer than MIN_PEOPLE_FLOOR)."""
    floor = min_people(least)
    return tuple(PopularSearch(c.query, c.people, c.clicked) for c in crowd if c.people >= floor)


def upcoming_searches(crowd: Iterable[CrowdQuery], least: int) -> tuple[CrowdQuery, ...]:
    """The crowd queries not offered yet that will be once their waiting people settle, or that
    are one person short of it (what the admin's completions page shows coming)."""
    floor = min_people(least)
    return tuple(c for c in crowd if c.people < floor and c.people + c.waiting >= floor - 1)


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
    return [Candidate(p.query, "search", p.people, tuple(tasks[t] for t in p.clicked)) for p in popular
            if p.clicked and all(t in tasks for t in p.clicked)]


class Vocabulary:
    """The catalog's own words (every task's texts), to tell a misspelling from a word."""

    def __init__(self, tasks: Iterable[TaskRecord]):
        self.words = frozenset(normalise(token) for task in tasks for text in task_texts(task)
                               for token in _TOKEN.findall(text.casefold()))

    def misspelt(self, text: str) -> bool:
        """Some word of `text` of three letters or more is neither the catalog's (as written, not
        by stem: "attendence" and "attendance" share the stem "attend") nor a common word of a
        supported language (lexicon.frequency.common). Short tokens and numbers are never judged."""
        return any(len(token) > 2 and not token.isdigit() and normalise(token) not in self.words
                   and not common(token) for token in _TOKEN.findall(text.casefold()))


#: What becomes of the written test cases' queries (`case_queries`): "all" are offered, "general"
#: only those that read as a general request (`reads_general`), "none" are not.
CASE_QUERIES = ("all", "general", "none")
GENERAL_MAX_WORDS = 4
_PERSONAL = frozenset("""i me my mine we us our ours you your yours he him his she her hers they them their theirs
mom mum dad yo mi mis nosotros nuestro nuestra tu tus el ella ellos ellas su sus eu meu minha nos nosso nossa
voce ele ela eles elas seu sua je moi mon ma mes nous notre vous votre il elle ils elles son sa ses leur""".split())


def reads_general(text: str) -> bool:
    """A query that names what to do or find rather than telling one family's story: at most
    GENERAL_MAX_WORDS words, no personal pronoun (or "mom", "dad") and no clause break (a comma,
    a question)."""
    tokens = _PLAIN_TOKEN.findall(normalise(text))
    return len(tokens) <= GENERAL_MAX_WORDS and not any(t in _PERSONAL for t in tokens) and \
        not any(mark in text for mark in ",;?!")


def candidates(tasks: Sequence[TaskRecord], cases: Iterable[CaseRecord],
               popular: Iterable[PopularSearch], exclusions: Exclusions = NO_EXCLUSIONS,
               case_queries: str = "general") -> tuple[Candidate, ...]:
    """Every candidate of the three sources up to MAX_COMPLETION_CHARS long and not excluded;
    cases and searches only without misspellings, and cases as `case_queries` says."""
    by_id = {task.id: task for task in tasks}
    vocabulary = Vocabulary(tasks)
    if case_queries not in CASE_QUERIES:
        raise ValueError(f"case_queries must be one of {CASE_QUERIES}, not {case_queries!r}")
    cased = [c for c in case_candidates(cases, by_id) if case_queries == "all" or
             (case_queries == "general" and reads_general(c.text))]
    written = [c for c in (*cased, *search_candidates(popular, by_id))
               if len(c.text) <= MAX_COMPLETION_CHARS and not vocabulary.misspelt(c.text)]
    found = (*(c for c in task_candidates(tasks) if len(c.text) <= MAX_COMPLETION_CHARS), *written)
    return tuple(c for c in found if not exclusions.excludes(c.text))


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
    leads: dict[str, set[str]] = defaultdict(set)
    for candidate in found:
        key = completion_key(candidate.text)
        if not key:
            continue
        leads[key].update(task.id for task in candidate.needs)
        score[key][SOURCES.index(candidate.source)] += candidate.weight
        written[key].setdefault(candidate.source, " ".join(candidate.text.split()))
    entries = []
    for key, parts in score.items():
        source = next(s for s, weight in zip(SOURCES, parts) if weight > 0)
        text = next(written[key][s] for s in reversed(SOURCES) if s in written[key])
        entries.append(Entry(key, text, source, (parts[0], parts[1], parts[2]), frozenset(leads[key]), detect(text)))
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

    def lookup(self, typed: Sequence[str], exclude: str = "", limit: int = COMPLETION_LIMIT,
               language: str = CATALOG_LANGUAGE) -> list[Completion]:
        """The best `limit` suggestions each of whose `typed` words prefixes one of its words,
        best first, those written in the catalog's language or the typed text's (`language`, as
        the search read it) before any in a third one: "eval" read as English is offered
        "Evaluation Status" before a Spanish alias "Evaluación de la audición", and the alias only
        where fewer than `limit` suggestions are in English (measured on the demo with a Spanish
        alias per task, docs/results.md: hidden instead, the English and Spanish typists' lead@5
        fell 1.6-1.8 points), without the one whose key is `exclude`, and one per task: a suggestion
        that leads to the same tasks as a better one is left out ("Enroll Child" and its alias
        "Enrollment" are one choice, not two; "eligibility", which leads to the eligibility
        determination and the application pool, is another choice than "Eligibility
        Determination"). The rarest typed word picks the candidates (one
        bisect each); the others are checked on each candidate's own words."""
        prefixes = sorted(set(typed))
        if not prefixes or limit <= 0:
            return []
        spans = {prefix: self._span(prefix) for prefix in prefixes}
        driver = min(prefixes, key=lambda p: spans[p][1] - spans[p][0])
        start, end = spans[driver]
        others = [p for p in prefixes if p != driver]
        found: list[Completion] = []
        chosen: set[frozenset[str]] = set()
        elsewhere: list[Entry] = []   # matches written in a third language: after the others
        for rank in sorted(set(self.ranks[start:end])):
            entry = self.entries[rank]
            if entry.key == exclude or entry.tasks in chosen or \
                    not all(any(w.startswith(p) for w in self.entry_words[rank]) for p in others):
                continue
            if entry.language not in (CATALOG_LANGUAGE, language):
                elsewhere.append(entry)
                continue
            chosen.add(entry.tasks)
            found.append(Completion(entry.text, entry.source, entry.tasks, entry.language))
            if len(found) == limit:
                return found
        for entry in elsewhere:
            if entry.tasks not in chosen and len(found) < limit:
                chosen.add(entry.tasks)
                found.append(Completion(entry.text, entry.source, entry.tasks, entry.language))
        return found


class Completions:
    """The completions of one catalog (tasks, written cases), one read of the popular searches and
    the admin's exclusions, with a view per set of visible roles (the anonymous one built at once)."""

    def __init__(self, tasks: Sequence[TaskRecord], cases: Iterable[CaseRecord],
                 popular: Iterable[PopularSearch] = (), views: int = ROLE_VIEWS,
                 exclusions: Exclusions = NO_EXCLUSIONS, case_queries: str = "general"):
        self.tasks = tuple(tasks)
        self.popular = tuple(popular)
        self.exclusions = exclusions
        self.candidates = candidates(self.tasks, cases, self.popular, exclusions, case_queries)
        self._views: LRU[CompletionView] = LRU(views)
        self.view(frozenset())

    def view(self, roles: frozenset[str]) -> CompletionView:
        """The view of `roles` (visible roles, as serving.service computes them), built on first use."""
        view = self._views.get(roles)
        if view is None:
            view = CompletionView(ranked_entries(visible_candidates(self.candidates, self.tasks, roles)))
            self._views.put(roles, view)
        return view

    def offered(self) -> list[tuple[Entry, frozenset[str]]]:
        """Every suggestion offered to someone, best first, each with the roles of the tasks it
        needs (empty: every caller may see those tasks; the hidden-word rule may still keep it
        from some): what the admin's completions page lists."""
        roles: dict[str, set[str]] = defaultdict(set)
        for candidate in self.candidates:
            for task in candidate.needs:
                roles[completion_key(candidate.text)].update(task.roles)
        return [(entry, frozenset(roles[entry.key])) for entry in ranked_entries(self.candidates)]

    def complete(self, query: str, roles: frozenset[str] = frozenset(),
                 limit: int = COMPLETION_LIMIT, language: str = CATALOG_LANGUAGE) -> list[Completion]:
        """Up to `limit` completions of `query` for a caller who may see `roles`; `language`: the
        language the search read `query` in (search.query.query_language; CompletionView.lookup)."""
        return self.view(frozenset(roles)).lookup(typed_words(query), normalise_query(query), limit, language)

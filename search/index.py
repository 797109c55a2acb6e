"""SearchIndex: everything the prefilter needs, precomputed from the catalog and the lexicon.

Built by a pure function (`build_index`) from plain records, so the live service, the
evaluation runs and the tests all build it the same way. Query time only reads it.
"""
from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Generic, Mapping, Sequence, TypeVar

import numpy as np
from scipy import sparse

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import RationaleLexicon
from lexicon.language import detect, foreign, in_other_language
from lexicon.text import display_labels, stem, words
from search.exemplars import ExemplarMemory, build_exemplars, exemplar_documents
from search.learned import LearnedExemplar, LearnedMemory, build_learned_memory, learned_cases, trusted_cases
from search.typed import TypedIndex, build_typed_index
from search.bm25 import bm25f_pseudo_tf, lucene_idf, saturate
from search.signals import column_max, rationale_weight
from settings import FieldWeights

# Extra vocabulary per task (DF-aware enrichment, see kb/): {task id: [(term or phrase, weight)]}
Enrichment = Mapping[str, Sequence[tuple[str, float]]]
ENRICHED_FIELD_WEIGHT = 1.0
# BM25F of the lexical signal (search.bm25.bm25f_pseudo_tf). Short fields (names, aliases) are
# barely length-normalised: "ASQ-3 Screening" and "ASQ:SE-2 Social-Emotional Screening" should not
# differ much because of length alone.
LEXICAL_K1 = 1.2
FIELD_B = {"name": 0.3, "aliases": 0.3, "category": 0.0, "help": 0.75, "enriched": 0.5}
MEMO_SIZE = 50_000   # typo-correction answers remembered per index
# Type-ahead: the query's last word is also read as the start of a longer word (search.index.
# prefix_expansion), once it has this many characters, expanded to at most this many terms.
PREFIX_MIN_CHARS = 2
PREFIX_MAX_TERMS = 8


def task_fields(task: TaskRecord) -> dict[str, str]:
    return {
        "name": task.name,
        "aliases": " ; ".join(task.aliases),
        "category": (task.category or "").replace("_", " "),
        "help": task.help,
    }


def embedding_text(task: TaskRecord) -> str:
    """What a task's embedding represents: its metadata concatenated (t_concat of Eq. 5), in the
    catalog's language: an alias written in another language (lexicon.language.detect) is left
    out. This passage view is what a catalog-language query is compared with (a query in another
    language reads `symmetric_text`); the alias still serves its own language as an exemplar and
    in the lexical fields, stemmed in that language. Measured with a Spanish alias added to each
    of the demo's 200 tasks (docs/results.md, "Spanish aliases written in the editor"), the typical
    spread already judged in the catalog's language: with the aliases in the passage text, the
    English queries' CV abstention answered 4 of the demo's 11 off-topic cases (2 without any
    alias); left out, 2 again. The held-out Spanish queries' Hit@1 went 0.700 -> 0.650 with it
    (the foreign weights start from the English ones), and back to 0.700 once the alias's words
    were read as Spanish (`foreign_text_terms`); 0.550 without the aliases."""
    parts = [task.name, *(a for a in task.aliases if not in_other_language(a)),
             (task.category or "").replace("_", " "), task.help]
    return ". ".join(p for p in parts if p)


def symmetric_text(task: TaskRecord) -> str:
    """What a task's query-side embedding represents: its name and help, embedded as a *query*
    (e5's symmetric use), the view of the task a query in another language than the catalog's is
    compared with (search.signal.embedding, which says why and what it was measured against)."""
    return ". ".join(p for p in (task.name, task.help) if p)


@dataclass(frozen=True)
class IdealWeights:
    """Per term, the best weight any task has for it; `default` stands in for unknown words.
    Denominators of the coverage normalisation (see search.signals.coverage_normalise)."""

    per_term: np.ndarray
    default: float

    @classmethod
    def of(cls, matrix: sparse.csc_matrix) -> "IdealWeights":
        per_term = column_max(matrix)
        positive = per_term[per_term > 0]
        return cls(per_term, float(np.median(positive)) if positive.size else 1.0)

    def of_term(self, column: int | None) -> float:
        if column is None:
            return self.default
        return float(self.per_term[column]) or self.default


@dataclass(frozen=True)
class SearchIndex:
    tasks: tuple[TaskRecord, ...]
    vocabulary: Mapping[str, int]           # term -> column
    lexical: sparse.csc_matrix              # (tasks, terms) BM25F weights
    rationale: sparse.csc_matrix            # (tasks, terms) rationale-lexicon weights
    lexical_ideal: IdealWeights
    rationale_ideal: IdealWeights
    exemplars: ExemplarMemory               # test-case queries (and names, aliases) per task
    exemplar_ideal: IdealWeights
    field_terms: tuple[Mapping[str, frozenset[str]], ...]  # per task: field -> terms (explanations)
    surface_words: tuple[str, ...]          # typo-correction vocabulary (catalog + lexicon)
    surface_to_term: Mapping[str, str]
    lexicon: RationaleLexicon
    task_vectors: np.ndarray | None = None  # (tasks, dim) L2-normalised passage embeddings, or None
    # (tasks, dim) the tasks' symmetric_text embedded as queries (L2-normalised), or None: what a
    # query in another language is compared with (search.signal.embedding)
    task_query_vectors: np.ndarray | None = None
    prototypes: np.ndarray | None = None    # (tasks, dim) fitted softmax-regression weights, or None
    learned: LearnedMemory | None = None    # implicit exemplars learned from use (search.learned), or None
    category_labels: Mapping[str, str] = field(default_factory=dict)   # category -> label people read
    # the words the tasks' own texts are written with (not the test cases'): what a why line may
    # say a word was read as (search.prefilter.explanation_targets)
    text_words: frozenset[str] = frozenset()
    # the terms only the tasks' texts in another language than the catalog's hold (a Spanish
    # alias: TaskText.foreign_terms) -> that language; the cases' are RationaleLexicon.foreign_terms
    foreign_text_terms: Mapping[str, str] = field(default_factory=dict)
    term_support: np.ndarray | None = None  # per term column: postings in lexical + rationale + exemplar
    # The same catalog indexed from the written cases alone, when cases learned from use joined
    # this one (search.learned.learned_cases): the counterfactual that contributions.learned is
    # measured against (search.prefilter.learned_attribution). None otherwise.
    written: "SearchIndex | None" = None
    # The same catalog indexed without the learned cases that anonymous networks alone stand
    # behind (the written cases and those verified people taught), when such cases joined this
    # one: what their evidence is bounded by (search.prefilter.bound_anonymous). None otherwise.
    trusted: "SearchIndex | None" = None
    # the typed signal's index (search.typed: words as typed, prefixes), read through `typed`
    typed_source: "Deferred[TypedIndex] | None" = field(default=None, compare=False, repr=False)
    _visibility: dict = field(default_factory=dict, compare=False, repr=False)
    _corrections: dict = field(default_factory=dict, compare=False, repr=False)
    _prefixes: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def typed(self) -> TypedIndex | None:
        """The typed signal's index (search.typed.build_typed_index), built at its first read and
        shared by every copy of this index (dataclasses.replace keeps the holder). Only a query
        still being typed reads it: the cross-validation folds of a fit's whole-query passes,
        of a preview and of an evaluation never do (1,807 builds cost 6.9 CPU s in the test
        suite, ~10% of each index build); the service reads it as it builds the live index
        (serving.service: `warm`), so that no keystroke waits for it."""
        return self.typed_source.get() if self.typed_source is not None else None

    def warm(self) -> None:
        """Build what this index defers (`typed`), and so do its counterfactuals (`written`,
        `trusted`): what a server calls before the index answers its first request."""
        for part in (self, self.written, self.trusted):
            if part is not None and part.typed_source is not None:
                part.typed_source.get()

    def memo_corrections(self, word: str, last: bool, min_similarity: float, compute):
        """The typo corrections of `word`, computed once per index (at most MEMO_SIZE entries)."""
        key = (word, last, min_similarity)
        found = self._corrections.get(key)
        if found is None:
            if len(self._corrections) >= MEMO_SIZE:
                self._corrections.clear()
            found = self._corrections[key] = compute()
        return found

    def prefix_expansion(self, word: str) -> dict[int, float]:
        """The vocabulary terms `word` may be the start of (search.index.prefix_expansion),
        computed once per word and index (at most MEMO_SIZE entries)."""
        found = self._prefixes.get(word)
        if found is None:
            if len(self._prefixes) >= MEMO_SIZE:
                self._prefixes.clear()
            found = self._prefixes[word] = prefix_expansion(self, word)
        return found

    def visible(self, role: str | None, restrict: bool = True) -> tuple[np.ndarray, tuple[TaskRecord, ...]]:
        """(rows, tasks) the caller may see, computed once per role and cached; `restrict=False`
        (evaluation) sees every active task."""
        key = (role, restrict)
        if key not in self._visibility:
            rows = np.flatnonzero([t.active and (not restrict or t.visible_to(role)) for t in self.tasks])
            self._visibility[key] = (rows, tuple(self.tasks[r] for r in rows))
        return self._visibility[key]

    def visible_word(self, word: str, role, restrict: bool = True) -> bool:
        """Whether a vocabulary word belongs to a task the caller may see: its term weighs in the
        catalog text or the rationale lexicon of a visible task. What a response SAYS (spelling
        corrections, "did you mean") keeps to such words: a word only a restricted task holds
        must not reach someone who may not see that task (issue 33 item 8)."""
        key = ("terms", role, restrict)
        if key not in self._visibility:
            rows = self.visible(role, restrict)[0]
            weights = abs(self.lexical[rows]).sum(axis=0) + abs(self.rationale[rows]).sum(axis=0)
            self._visibility[key] = frozenset(np.flatnonzero(np.asarray(weights).ravel() > 0).tolist())
        column = self.vocabulary.get(self.surface_to_term.get(word, stem(word)))
        return column is not None and column in self._visibility[key]

    def with_vectors(self, vectors: np.ndarray | None, exemplar_vectors: np.ndarray | None = None,
                     oos_vectors: np.ndarray | None = None, query_vectors: np.ndarray | None = None) -> "SearchIndex":
        """The index with its dense parts: task passage vectors and exemplar query vectors
        (both or neither; None: the embedding signals are unavailable), and the tasks' query-side
        vectors (`task_query_vectors`; None: a query in another language is compared with the
        passage vectors)."""
        if vectors is None or exemplar_vectors is None:
            vectors = exemplar_vectors = query_vectors = None
        return replace(self, task_vectors=vectors, task_query_vectors=query_vectors, prototypes=None,
                       exemplars=self.exemplars.with_vectors(exemplar_vectors, oos_vectors),
                       learned=self.learned.with_vectors(None) if self.learned is not None else None,
                       _visibility={}, _corrections={})

    def with_learned(self, learned: LearnedMemory | None) -> "SearchIndex":
        """The index with learned exemplars (search.learned; vectors attached by the caller)."""
        return replace(self, learned=learned)

    def with_written(self, written: "SearchIndex | None") -> "SearchIndex":
        """The index with its written-cases-only counterfactual (see `written`). Its exemplar
        memory keeps no float16 screen: the counterfactual reads it only at the returned tasks
        that the served cascade did not reach (search.exemplars.neighbour_signals), a few rows."""
        if written is not None and written.exemplars.screen is not None:
            written = replace(written, exemplars=replace(written.exemplars, screen=None, screen_error=0.0))
        return replace(self, written=written)

    def with_trusted(self, trusted: "SearchIndex | None") -> "SearchIndex":
        """The index with its trusted counterpart (see `trusted`)."""
        return replace(self, trusted=trusted)

    def with_prototypes(self, prototypes: np.ndarray | None) -> "SearchIndex":
        return replace(self, prototypes=prototypes if self.task_vectors is not None else None, _visibility={})

    @property
    def has_vectors(self) -> bool:
        return self.task_vectors is not None and self.exemplars.vectors is not None


@dataclass(frozen=True)
class TaskText:
    """The half of an index that depends on the tasks alone: each task's fields analysed once,
    their BM25F weights by term, and the task part of each exemplar document. An index of the
    same tasks with other test cases (a cross-validation fold, an admin preview's before and
    after) reuses it instead of re-analysing every task."""

    tasks: tuple[TaskRecord, ...]
    terms: tuple[str, ...]                  # sorted; the columns of `lexical`
    lexical: sparse.csc_matrix              # (tasks, len(terms)) BM25F weights
    field_terms: tuple[Mapping[str, frozenset[str]], ...]
    surface_to_term: Mapping[str, str]      # catalog surface words -> their terms
    documents: tuple[tuple[str, ...], ...]  # per task: terms of name, aliases and help (exemplar BM25)
    # the terms only the tasks' texts in another language hold (a Spanish alias) -> that language
    foreign_terms: Mapping[str, str] = field(default_factory=dict)


def analyse_tasks(tasks: Sequence[TaskRecord], field_weights: FieldWeights,
                  enrichment: Enrichment | None = None) -> TaskText:
    """The case-independent part of `build_index` (see TaskText)."""
    weights = {"name": field_weights.name, "aliases": field_weights.aliases,
               "category": field_weights.category, "help": field_weights.help,
               "enriched": ENRICHED_FIELD_WEIGHT}
    surface: dict[str, str] = {}
    own_terms: set[str] = set()
    other_terms: dict[str, str] = {}
    per_task_tfs: list[dict[str, Counter]] = []
    for task in tasks:
        fields_tf: dict[str, Counter] = {}
        for name, text in task_fields(task).items():
            counts = fields_tf[name] = Counter()
            # each alias in its own language (lexicon.language: an alias may be Spanish); the same
            # words as the joined field otherwise. Only the catalog language's words are its surface
            # words (the typo vocabulary, the type-ahead's prefixes, the words that vote for the
            # catalog's language: search.query.query_language): no word is corrected into a Spanish
            # alias's, and "audic" typed on a Spanish page is not read as English for beginning one
            for part in (task.aliases if name == "aliases" else (text,)):
                language = detect(part)
                for w in words(part, language):
                    term = stem(w, language)
                    if foreign(language):
                        other_terms.setdefault(term, language)
                    else:
                        surface.setdefault(w, term)
                        own_terms.add(term)
                    counts[term] += 1
        extra = Counter()
        for phrase, weight in (enrichment or {}).get(task.id, ()):
            for w in words(phrase):
                extra[stem(w)] += weight
        fields_tf["enriched"] = extra
        per_task_tfs.append(fields_tf)

    task_terms = sorted({t for tfs in per_task_tfs for c in tfs.values() for t in c})
    column = {term: i for i, term in enumerate(task_terms)}
    n_tasks = len(tasks)
    lengths = [{f: sum(c.values()) for f, c in tfs.items()} for tfs in per_task_tfs]
    avg = {f: (sum(l[f] for l in lengths) / n_tasks if n_tasks else 0.0) for f in weights}
    df = Counter(t for tfs in per_task_tfs for t in {t for c in tfs.values() for t in c})
    idf = lucene_idf([df[term] for term in task_terms], n_tasks)
    lexical = _Postings()
    for row, tfs in enumerate(per_task_tfs):
        for term in {t for c in tfs.values() for t in c}:
            pseudo = bm25f_pseudo_tf({f: c.get(term, 0) for f, c in tfs.items()}, lengths[row], avg, weights, FIELD_B)
            lexical.add(row, column[term], saturate(pseudo, idf[column[term]], LEXICAL_K1))
    return TaskText(tasks=tuple(tasks), terms=tuple(task_terms), lexical=lexical.matrix((n_tasks, len(task_terms))),
                    field_terms=tuple({f: frozenset(c) for f, c in tfs.items() if c} for tfs in per_task_tfs),
                    surface_to_term=surface, documents=tuple(tuple(d) for d in exemplar_documents(tasks)),
                    foreign_terms={t: lang for t, lang in other_terms.items() if t not in own_terms})


def build_index(tasks: Sequence[TaskRecord], lexicon: RationaleLexicon, field_weights: FieldWeights,
                enrichment: Enrichment | None = None, cases: Sequence[CaseRecord] = (),
                task_text: TaskText | None = None) -> SearchIndex:
    """Everything a query needs, from the catalog and the test cases (`lexicon` is built from
    the same `cases`; they also fill the exemplar memory). `task_text`: `analyse_tasks` of the
    same `tasks`, field weights and enrichment, when the caller has it already."""
    if task_text is None:
        task_text = analyse_tasks(tasks, field_weights, enrichment)
    surface = dict(task_text.surface_to_term)
    for w in lexicon.surface_words:
        surface.setdefault(w, lexicon.surface_terms.get(w) or stem(w))

    vocab_terms = sorted(set(task_text.terms) | set(lexicon.associations))
    vocabulary = {term: i for i, term in enumerate(vocab_terms)}
    n_tasks = len(tasks)
    shape = (n_tasks, len(vocabulary))
    lexical_matrix = _with_columns(task_text.lexical, [vocabulary[t] for t in task_text.terms], shape)

    row_of = {task.id: row for row, task in enumerate(tasks)}
    rationale = _Postings()
    for term, linked in lexicon.associations.items():
        present = {tid: count for tid, count in linked.items() if tid in row_of}
        term_links = sum(present.values())
        for task_id, count in present.items():
            rationale.add(row_of[task_id], vocabulary[term], rationale_weight(count, term_links, len(present), n_tasks))

    rationale_matrix = rationale.matrix(shape)
    exemplars = build_exemplars(tasks, cases, vocabulary, task_text.documents)
    return SearchIndex(tasks=tuple(tasks), vocabulary=vocabulary, lexical=lexical_matrix, rationale=rationale_matrix,
                       lexical_ideal=IdealWeights.of(lexical_matrix), rationale_ideal=IdealWeights.of(rationale_matrix),
                       exemplars=exemplars, exemplar_ideal=IdealWeights.of(exemplars.lexical),
                       field_terms=task_text.field_terms, surface_words=tuple(sorted(surface)),
                       surface_to_term=surface, lexicon=lexicon, category_labels=category_labels(tasks),
                       text_words=frozenset(task_text.surface_to_term),
                       foreign_text_terms=task_text.foreign_terms,
                       term_support=term_support(lexical_matrix, rationale_matrix, exemplars.lexical),
                       typed_source=Deferred(partial(build_typed_index, tuple(tasks), tuple(cases))))


T = TypeVar("T")


class Deferred(Generic[T]):
    """A value made by `make()` at its first `get()`, once, whichever thread asks first."""

    def __init__(self, make: Callable[[], T]):
        self._make: Callable[[], T] | None = make
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        if self._make is not None:
            with self._lock:
                if self._make is not None:
                    self._value = self._make()
                    self._make = None
        return self._value

    @property
    def made(self) -> bool:
        return self._make is None


def term_support(*matrices: sparse.csc_matrix) -> np.ndarray:
    """Per term column, how many (task, term) postings the sparse signals hold for it: the
    document frequency over task text, rationale lexicon and exemplar documents together."""
    return sum(np.diff(m.indptr).astype(np.float32) for m in matrices)


def says_what_it_begins(word: str) -> bool:
    """Whether a word still being typed is long enough to say which words it may begin
    (PREFIX_MIN_CHARS) and is not a number: the guard of `prefix_expansion` and of
    search.query.reads_no_catalog_word."""
    return len(word) >= PREFIX_MIN_CHARS and not word.isdigit()


def prefix_expansion(index: "SearchIndex", word: str) -> dict[int, float]:
    """Type-ahead prefix evidence: the term columns whose surface words start with `word` (an
    unfinished last word: "dev", "devel", "immun"), weighted, {column: weight} summing to 1.

        weight(t) ∝ support(t) · |word| / |shortest surface word of t starting with word|

    Every completion is a candidate reading of what the person is typing, as in Algolia's and
    Meilisearch's "last word as a prefix" (both match the last query word as the prefix of any
    indexed word); among the readings, terms more tasks use (document frequency, as a query
    auto-completion ranks completions by popularity: Bar-Yossef & Kraus, WWW 2011) and
    completions closer to what was typed count more. The PREFIX_MAX_TERMS heaviest are kept and
    renormalised, so the word counts as one query word in the coverage normalisation. Empty
    when `word` is shorter than PREFIX_MIN_CHARS, a term itself, or starts nothing.

    The vocabulary is `index.surface_words`, sorted at index time: the completions are one
    contiguous slice found by binary search, so the cost is the number of completions."""
    if not says_what_it_begins(word) or stem(word) in index.vocabulary:
        return {}
    surface = index.surface_words
    lo = bisect.bisect_left(surface, word)
    hi = bisect.bisect_left(surface, word + "\uffff", lo)
    closeness: dict[int, float] = {}
    for completion in surface[lo:hi]:
        column = index.vocabulary.get(index.surface_to_term.get(completion, ""))
        if column is not None:
            closeness[column] = max(closeness.get(column, 0.0), len(word) / len(completion))
    if not closeness or index.term_support is None:
        return {}
    weights = {column: float(index.term_support[column]) * near for column, near in closeness.items()}
    top = sorted(weights.items(), key=lambda item: (-item[1], item[0]))[:PREFIX_MAX_TERMS]
    total = sum(weight for _, weight in top)
    return {column: weight / total for column, weight in top if weight > 0} if total > 0 else {}


def category_labels(tasks: Sequence[TaskRecord]) -> dict[str, str]:
    """Each category's display label (lexicon.text.display_label over the tasks' names, aliases
    and help: an acronym stays in capitals)."""
    texts = [text for task in tasks for text in (task.name, *task.aliases, task.help)]
    return display_labels(sorted({t.category for t in tasks if t.category}), texts)


def _with_columns(matrix: sparse.csc_matrix, columns: Sequence[int], shape: tuple[int, int]) -> sparse.csc_matrix:
    """`matrix` with its column j moved to `columns[j]` of a matrix of `shape` (a wider vocabulary)."""
    coo = matrix.tocoo()
    moved = np.asarray(columns, dtype=np.int64)[coo.col] if coo.nnz else coo.col
    return sparse.csc_matrix((coo.data, (coo.row, moved)), shape=shape)


class _Postings:
    """Collects (task row, term column, weight) triples and turns them into a CSC matrix."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.data: list[float] = []

    def add(self, row: int, column: int, weight: float) -> None:
        if weight > 0:
            self.rows.append(row)
            self.cols.append(column)
            self.data.append(weight)

    def matrix(self, shape: tuple[int, int]) -> sparse.csc_matrix:
        return sparse.csc_matrix((np.asarray(self.data, dtype=np.float32), (self.rows, self.cols)), shape=shape)


def with_use(build: Callable[[Sequence[CaseRecord]], SearchIndex], cases: Sequence[CaseRecord],
             as_cases: Sequence[LearnedExemplar] = (), in_memory: Sequence[LearnedExemplar] = (),
             held_out: frozenset[str] = frozenset(), cases_held_out: frozenset[str] | None = None,
             written: bool = True) -> SearchIndex:
    """The one recipe of an index that holds what use taught, from `build` (cases -> index: the
    caller's tasks, field weights and enrichment) and the written `cases`:

    * `as_cases`: learned exemplars that join the cases (search.learned.learned_cases), the
      written-cases-only index kept beside it (`written`: contributions.learned's
      counterfactual), and, where anonymous pairs are among them, the index without those
      (`trusted`: the written cases and what verified people taught; search.learned.trusted_cases),
      which bounds their evidence (search.prefilter.bound_anonymous);
    * `in_memory`: those of the `learned` signal's memory (the trusted evidence reads its
      verified ones: people_values in search/signal/learned.py).

    `held_out`: queries whose exemplars stay out (a CV fold's); `cases_held_out`: those left out
    of the cases (default: `held_out`; a fold leaves out near copies of its queries too)."""
    cases_held_out = held_out if cases_held_out is None else cases_held_out
    if not as_cases:
        index = build(cases)
    else:
        index = build((*cases, *learned_cases(as_cases, cases_held_out)))
        verified = trusted_cases(as_cases, cases_held_out)
        base = build(cases) if written or verified == () else None   # the written cases' own, where wanted
        if written:
            index = index.with_written(base)
        if verified is not None:
            index = index.with_trusted(base if not verified else build((*cases, *verified)))
    if in_memory:
        index = index.with_learned(build_learned_memory([t.id for t in index.tasks], in_memory, held_out))
    return index

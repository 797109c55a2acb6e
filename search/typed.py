"""The typing signals, `typed` and `begins`: evidence for a query that is still being typed.

The widget asks after every keystroke, so what a person has typed so far ("dev", "how do i re",
"asq") is usually a fragment: the last word unfinished, the words before it often the very
function words ("how", "what", "my") that the other sparse signals drop as stopwords. This is the
evidence a plain prefix search engine (Meilisearch, Typesense, Algolia) ranks with, kept as one
signal of the prefilter:

    typed(q, t) = [ sum_{w in q'} bm25(w, t) + max_{c in C(l)} bm25(c, t) ]
                  / [ sum_{w in q'} ideal(w) + max_{c in C(l)} ideal(c) ]

over one document per task holding its name, aliases, category, help and the queries of its
test cases, tokenised as typed (case-folded alphanumeric runs: no stemming, no stopword removal,
so "how do i" and "what is my" keep the evidence they carry). q' are the query's words before
the last, l the last word, C(l) the indexed words that begin with l (l itself included), the
PREFIX_MAX_COMPLETIONS most frequent of them; with none and |l| >= TYPO_MIN_CHARS, the words
whose first |l| letters are one edit from l (prefix typo tolerance, as Algolia and Typesense
allow). bm25 is search.bm25's (Lucene's idf and defaults k1 = 1.2, b = 0.75, `bm25_matrix`),
ideal(w) = max_t bm25(w, t), an unknown word's ideal the median one, so the signal is
coverage-normalised to [0, 1] like the other sparse signals (search.signals.coverage_normalise).
Taking the best completion rather than their sum is how a prefix engine ranks: a task matches
the prefix once, through its best word.

Index time: the BM25 matrix (tasks x words), its column maxima, the sorted vocabulary (a prefix's
completions are one contiguous slice found by binary search) and each word's document frequency.
Query time: a slice, a few sparse columns, one max. A word's completions are memoised.

Beside it, the `begins` signal: how many of the task's exemplar texts (its cases' queries, its
name and aliases), as typed, begin with what has been typed so far,

    begins(q, t) = n_t(q) / (n(q) + 1)

n(q) counting every task's: an estimate of P(t | a known query that begins like this one), the
popularity that query auto-completion ranks by (Bar-Yossef & Kraus, WWW 2011), with one unseen
query in the denominator so that a lone match is not certainty. "how m" meets "how much" and
"how many" whole, where the word-level evidence sees only "how" and some word in "m". The
exemplar texts are kept sorted at index time: the ones beginning with q are one slice, and a
query costs a bincount over it.

Both are computed only for a query the prefilter reads as still being typed (`unfinished`, or
the caller's `typing=1`): a whole query ranks as it did before they existed, and the per-catalog
fit weighs them in the typing weights alone (search.fitting.fit_typing), fitted on prefixes of
the catalog's own cases.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein
from rapidfuzz import process
from scipy import sparse

from catalog.records import CaseRecord, TaskRecord
from lexicon.normalise import normalise
from search.bm25 import bm25_matrix

PREFIX_MAX_COMPLETIONS = 64   # completions of the last word read, the most frequent first
TYPO_MIN_CHARS = 4            # a prefix this long may carry one typo
# A query this short (characters, spaces folded) is read as still being typed whatever it holds
# (`unfinished`): "asq", "how m", "lead " are what people type first.
TYPING_MAX_CHARS = 8
# Typing classes by length (characters, spaces folded): 1 up to 3, 2 up to 5, 3 beyond. Each has
# its own abstention threshold (search.fitting.fit_abstention), so each class of cut is refused
# at the budget rather than the pooled one (the demo's held-out 3-character cuts: 7.5% -> 5%
# refused; its 5-character ones without embeddings: 12.5% -> 10%).
TYPING_CLASSES = (3, 5)
# The abstention class of a text the prefilter reads as whole (longer than TYPING_MAX_CHARS, of
# several words or a finished one) that the caller says is still being typed (the widget's
# `typing=1` on every keystroke): a sentence cut mid-word, "what is the balance of my chec". It
# is ranked as the whole query it is becoming (the whole-query weights, signals and tail cut) and
# judged by its own threshold, calibrated on such prefixes of the cases (search.fitting.typed):
# judged by the whole-query threshold, CLINC150 val's typed keystrokes were refused 34% of the
# time (docs/prefix-search.md, "Every keystroke, judged as a sequence").
TYPED_WHOLE = len(TYPING_CLASSES) + 2
MEMO_SIZE = 50_000
_TOKEN = re.compile(r"[0-9a-z]+")


def typed_tokens(text: str) -> list[str]:
    """Case-folded alphanumeric runs of `text`, in order: words as typed, stopwords kept."""
    return _TOKEN.findall(normalise(text))


@dataclass(frozen=True)
class TypedIndex:
    words: tuple[str, ...]                 # the vocabulary, sorted
    column: dict[str, int]                 # word -> column of `matrix`
    matrix: sparse.csc_matrix              # (tasks, words) BM25 weights
    ideal: np.ndarray                      # per column: the best task's weight
    default_ideal: float                   # an unknown word's ideal: the median column's
    frequency: np.ndarray                  # per column: document frequency
    openings: tuple[str, ...] = ()         # every exemplar text as typed (tokens joined by one space), sorted
    opening_rows: np.ndarray | None = None # the task row of each, in the same order
    _completions: dict = field(default_factory=dict, compare=False, repr=False)
    _prefixes: dict = field(default_factory=dict, compare=False, repr=False)

    def completions(self, word: str) -> tuple[int, ...]:
        """Columns of the indexed words beginning with `word` (itself included), the
        PREFIX_MAX_COMPLETIONS most frequent; failing any, with a prefix of TYPO_MIN_CHARS or
        more, those whose first |word| letters are one edit away. Memoised."""
        found = self._completions.get(word)
        if found is None:
            if len(self._completions) >= MEMO_SIZE:
                self._completions.clear()
            found = self._completions[word] = self._complete(word)
        return found

    def _complete(self, word: str) -> tuple[int, ...]:
        columns = self._slice(word)
        if not columns and len(word) >= TYPO_MIN_CHARS:
            near = process.extract(word, self._prefixes_of(len(word)), scorer=Levenshtein.distance,
                                   score_cutoff=1, limit=None)
            columns = [c for prefix, _, _ in near for c in self._slice(prefix)]
        ranked = sorted(set(columns), key=lambda c: (-self.frequency[c], c))
        return tuple(ranked[:PREFIX_MAX_COMPLETIONS])

    def _slice(self, prefix: str) -> list[int]:
        lo = bisect.bisect_left(self.words, prefix)
        hi = bisect.bisect_left(self.words, prefix + "\uffff", lo)
        return [self.column[w] for w in self.words[lo:hi]]

    def _prefixes_of(self, length: int) -> list[str]:
        """The distinct first-`length`-letter prefixes of the vocabulary (for typo tolerance)."""
        found = self._prefixes.get(length)
        if found is None:
            found = self._prefixes[length] = sorted({w[:length] for w in self.words if len(w) >= length})
        return found

    def is_unfinished_word(self, word: str) -> bool:
        """`word` is not an indexed word but begins one: a word still being typed."""
        return word not in self.column and bool(self._slice(word))


def build_typed_index(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord]) -> TypedIndex:
    """One BM25 document per task (name, aliases, category, help and its in-scope case queries),
    and the sorted exemplar texts (name, aliases, case queries) of the `begins` signal."""
    row_of = {task.id: row for row, task in enumerate(tasks)}
    exemplar_texts = [[t.name, *t.aliases] for t in tasks]          # what people's queries may begin like
    for case in cases:
        for task_id in case.gold:
            if task_id in row_of:
                exemplar_texts[row_of[task_id]].append(case.query)
    texts = [[*known, (t.category or "").replace("_", " "), t.help] for t, known in zip(tasks, exemplar_texts)]
    documents = [Counter(typed_tokens(" ".join(text))) for text in texts]
    exemplars = sorted((" ".join(tokens), row) for row, known in enumerate(exemplar_texts)
                       for tokens in map(typed_tokens, known) if tokens)
    words = tuple(sorted({w for d in documents for w in d}))
    column = {w: i for i, w in enumerate(words)}
    matrix = bm25_matrix(documents, column)
    df = np.diff(matrix.indptr).astype(np.float64)   # every word's postings: its document frequency
    ideal = matrix.max(axis=0).toarray().ravel() if len(words) else np.zeros(0, dtype=np.float32)
    positive = ideal[ideal > 0]
    return TypedIndex(words, column, matrix, ideal, float(np.median(positive)) if positive.size else 1.0, df,
                      tuple(text for text, _ in exemplars), np.array([row for _, row in exemplars], dtype=np.int64))


def unfinished(typed: TypedIndex, query: str) -> int:
    """The typing class of `query` (TYPING_CLASSES: 1, 2 or 3 by length), or 0 for a whole query.
    The prefilter reads a query as still being typed at most TYPING_MAX_CHARS characters long, or
    when it is one word that is no indexed word but begins one ("developme", "immunizati").

    Measured alternatives (docs/prefix-search.md):
    - several words whose last begins an indexed word ("developmental scr") read as unfinished
      too: CLINC150 val without written negatives answered 13 of its 100 off-topic queries, not 9;
      such a query is a whole one here (its last word still reaches its completions through
      search.index.prefix_expansion);
    - a short query ending in a whole indexed word ("where", "how do i", "Single") read as a whole
      query: HINT3's short real off-topic queries are refused again (answered 0.543 -> 0.406),
      but CLINC150's 5- and 8-character cuts are refused 46% and 50% of the time."""
    folded = " ".join(normalise(query).split())
    if len(folded) > TYPING_MAX_CHARS:
        tokens = typed_tokens(folded)
        if not (len(tokens) == 1 and typed.is_unfinished_word(tokens[0])):
            return 0
    return typing_class_of(folded)


def typing_class_of(query: str) -> int:
    """The typing class of a query known to be still typed (TYPING_CLASSES): 1, 2 or 3 by length."""
    return 1 + bisect.bisect_left(TYPING_CLASSES, len(" ".join(normalise(query).split())))


def typed_signal(typed: TypedIndex, query: str, finished: bool = False) -> np.ndarray:
    """typed(q, t) of every task (module docstring), in [0, 1]; zeros without any word.
    `finished`: a space followed the last word, which then counts as a whole word, not a prefix."""
    tokens = typed_tokens(query) + ([""] if finished else [])
    n = typed.matrix.shape[0]
    if not tokens:
        return np.zeros(n, dtype=np.float32)
    scores = np.zeros(n, dtype=np.float64)
    ideal = 0.0
    for word in dict.fromkeys(tokens[:-1]):
        col = typed.column.get(word)
        if col is None:
            ideal += typed.default_ideal
            continue
        scores += typed.matrix.getcol(col).toarray().ravel()
        ideal += float(typed.ideal[col])
    completions = typed.completions(tokens[-1]) if tokens[-1] else ()
    if completions:
        block = typed.matrix[:, list(completions)]
        scores += block.max(axis=1).toarray().ravel()
        ideal += float(typed.ideal[list(completions)].max())
    elif tokens[-1]:
        ideal += typed.default_ideal
    return (scores / ideal).astype(np.float32) if ideal > 0 else np.zeros(n, dtype=np.float32)


def begins_signal(typed: TypedIndex, query: str, finished: bool = False) -> np.ndarray:
    """begins(q, t) of every task (module docstring); zeros without any word."""
    n = typed.matrix.shape[0]
    key = " ".join(typed_tokens(query))
    if not key or typed.opening_rows is None:
        return np.zeros(n, dtype=np.float32)
    key += " " if finished else ""
    lo = bisect.bisect_left(typed.openings, key)
    hi = bisect.bisect_left(typed.openings, key + "\uffff", lo)
    counts = np.bincount(typed.opening_rows[lo:hi], minlength=n).astype(np.float64)
    return (counts / (hi - lo + 1)).astype(np.float32)

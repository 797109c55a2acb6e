"""The type-ahead baseline: what a plain prefix search engine answers to a partly typed query.

Meilisearch, Typesense and Algolia read the last query word, unless a space follows it, as the
prefix of any indexed word ("devel" matches "development", "developmental"), and every other
word as itself. This baseline does the same over one BM25 document per task holding its name,
aliases, help and the written (training) cases' queries, the text such an engine would index:

    score(q, d) = sum_{w in finished words} bm25(w, d) + max_{c in V, c starts with l} bm25(c, d)

with `l` the unfinished last word and V the indexed vocabulary. BM25 is Okapi BM25 with
Lucene's parameters (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), over
case-folded words without stemming or stopword removal (as those engines index by default).
Taking the best completion, not their sum, is how a prefix engine ranks: a document matches
the prefix once, through its best word. (rank-bm25 scores one query at a time by looping over
every document in Python; the matrix below scores a query with one sparse product.)
"""
from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from lexicon.text import normalise

K1, B = 1.2, 0.75
_TOKEN = re.compile(r"[0-9a-z]+")


def tokens(text: str) -> list[str]:
    """Case-folded alphanumeric runs: what a prefix engine's default tokenizer indexes."""
    return _TOKEN.findall(normalise(text))


def lucene_idf(df: int, n: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)): Lucene's BM25 idf (never negative)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class PrefixEngine:
    """BM25 term scores per (word, task) precomputed at index time, and the sorted vocabulary
    whose one contiguous slice holds a prefix's completions."""

    task_ids: tuple[str, ...]
    vocabulary: tuple[str, ...]           # sorted
    scores: dict[str, np.ndarray]         # word -> bm25(word, d) for every task d

    def rank(self, query: str, k: int) -> list[str]:
        """The top `k` task ids for `query` as typed (a trailing space finishes the last word);
        tasks that match nothing are not returned."""
        words = tokens(query)
        if not words:
            return []
        finished = query[-1:].isspace()
        total = np.zeros(len(self.task_ids))
        for word in words if finished else words[:-1]:
            if word in self.scores:
                total += self.scores[word]
        if not finished:
            last = words[-1]
            lo = bisect.bisect_left(self.vocabulary, last)
            hi = bisect.bisect_left(self.vocabulary, last + "\uffff", lo)
            if hi > lo:
                total += np.max([self.scores[w] for w in self.vocabulary[lo:hi]], axis=0)
        order = np.argsort(-total, kind="stable")[:k]
        return [self.task_ids[i] for i in order if total[i] > 0]


def build_prefix_engine(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord]) -> PrefixEngine:
    """One document per active task: name, aliases, help and the queries of its training cases."""
    tasks = [t for t in tasks if t.active]
    text = {t.id: [t.name, *t.aliases, t.help] for t in tasks}
    for case in cases:
        for task_id in case.gold:
            if task_id in text:
                text[task_id].append(case.query)
    documents = [Counter(tokens(" ".join(text[t.id]))) for t in tasks]
    n = len(documents)
    lengths = np.array([sum(d.values()) for d in documents], dtype=np.float64)
    average = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
    df = Counter(word for d in documents for word in d)
    scores = {}
    for word, frequency in df.items():
        tf = np.array([d.get(word, 0) for d in documents], dtype=np.float64)
        scores[word] = lucene_idf(frequency, n) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths / average))
    return PrefixEngine(tuple(t.id for t in tasks), tuple(sorted(scores)), scores)

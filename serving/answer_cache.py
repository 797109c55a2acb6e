"""AnswerCache: finished search answers of ONE live index, least recently used evicted.

Type-ahead sends the same few prefixes over and over ("hea", "hear", "heari" from every user
typing "hearing screening"), and the pipeline is deterministic for a given index: same index,
same query, same k and visible roles, same answer. Computing it again costs milliseconds of
Python (signals, fusion, explanations, rounding) where HTTP costs well under one, so a search
box would run at a fraction of its server's capacity. SearchService keeps one AnswerCache per
live index: a new index (an edit, a rollback, a fit, vectors attached after an outage) starts
an empty one, so an answer is never served from an index that is no longer live.

Only answers that are complete are stored: never a degraded one (the embeddings may be back on
the next request) nor a re-ranked one (the LLM has its own cache, rerank/cache.py). Each is
kept with its JSON encoding (serving.answer), so a hit costs neither the pipeline nor encoding
its results again.
"""
from __future__ import annotations

from serving.answer import Answer
from search.lru import LRU


class AnswerCache(LRU[Answer]):
    """Answers of the live index `owner`, keyed by (query, k, visible roles, role,
    restrict_roles); the service uses it only while `owner` is the live index."""

    def __init__(self, owner: object, capacity: int):
        super().__init__(capacity)
        self.owner = owner

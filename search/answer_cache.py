"""AnswerCache: finished search answers of ONE live index, least recently used evicted.

Type-ahead sends the same few prefixes over and over ("hea", "hear", "heari" from every user
typing "hearing screening"), and the pipeline is deterministic for a given index: same index,
same query, same k and visible roles, same answer. Computing it again costs milliseconds of
Python (signals, fusion, explanations, rounding) where HTTP costs well under one, so a search
box would run at a fraction of its server's capacity. SearchService keeps one AnswerCache per
live index: a new index (an edit, a rollback, a fit, vectors attached after an outage) starts
an empty one, so an answer is never served from an index that is no longer live.

Only answers that are complete are stored: never a degraded one (the embeddings may be back on
the next request) nor a re-ranked one (the LLM has its own cache, rerank/cache.py).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Hashable


class AnswerCache:
    def __init__(self, owner: object, capacity: int):
        self.owner = owner          # the LiveIndex whose answers these are
        self.capacity = capacity
        self._answers: OrderedDict[Hashable, dict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> dict | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def put(self, key: Hashable, answer: dict) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.capacity:
                self._answers.popitem(last=False)

    def __len__(self) -> int:
        return len(self._answers)

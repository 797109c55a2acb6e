"""Disk cache of validated LLM answers, so a repeated query costs a lookup instead of a call.

The key covers everything the answer depends on that can change without a deploy: the model,
the prompt version, the query (normalised like the index normalises it, whitespace collapsed),
the shortlist as (task_id, name) pairs in order, and the in-context examples. Help text is not
in the key; entries expire after CACHE_TTL_S so an edited help text is picked up within a day.

Only usable answers are stored. Cache trouble (locked or corrupt database, full disk) is logged
and treated as a miss: the cache is an optimisation and must never fail a search.
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Sequence

import diskcache

from lexicon.normalise import normalise

from .prompt import PROMPT_VERSION
from .records import Candidate, Example

log = logging.getLogger(__name__)

CACHE_TTL_S = 24 * 3600

#: What is stored: the accepted (idx, reason) pairs in answer order. Drop counts are not: a
#: hit validates nothing, and replaying them would inflate the drop metrics on every hit.
CachedAnswer = list[tuple[int, str]]


def cache_key(model: str, query: str, candidates: Sequence[Candidate], examples: Sequence[Example]) -> str:
    payload = [
        model,
        PROMPT_VERSION,
        " ".join(normalise(query).split()),
        [(c.task_id, c.name) for c in candidates],
        [(e.query, list(e.gold_names), e.rationale) for e in examples],
    ]
    digest = hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"rerank:{digest}"


class RerankCache:
    """A thin, never-raising wrapper around an optional `diskcache.Cache`."""

    def __init__(self, cache: diskcache.Cache | None):
        self._cache = cache

    def get(self, key: str) -> CachedAnswer | None:
        if self._cache is None:
            return None
        try:
            return self._cache.get(key)
        except Exception as exc:  # noqa: BLE001 - any cache failure is a miss (infra.cache heals the cache)
            log.warning("rerank cache read failed (%s: %s); treating as a miss", type(exc).__name__, exc)
            return None

    def put(self, key: str, answer: CachedAnswer) -> None:
        if self._cache is None:
            return
        try:
            self._cache.set(key, answer, expire=CACHE_TTL_S)
        except Exception as exc:  # noqa: BLE001 - failing to cache must not fail the search
            log.warning("rerank cache write failed (%s: %s)", type(exc).__name__, exc)

"""The plain records analytics works on: what the search log and the event table hold, as
immutable values. The formulas (analytics.formulas) take lists of these and nothing else."""
from __future__ import annotations

import base64
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from lexicon.text import normalise_query

#: The widget's opaque session id: 8-64 characters of [A-Za-z0-9_-] (it makes one up per visit).
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
#: A search id as /api/search issues it (new_search_id), and as /api/events accepts it.
SEARCH_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")


_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_ASCII_ORDER = bytes(sorted(_BASE64URL))   # the same 64 characters, in the order strings compare
_SORTABLE = bytes.maketrans(_BASE64URL, _ASCII_ORDER)


class RandomBytes:
    """The operating system's random bytes (os.urandom, what `secrets` reads), fetched BLOCK
    bytes at a time and handed out in slices, each byte to one caller only.

    Why not one os.urandom call per search id: that call releases the interpreter lock (the GIL)
    around its system call, so under load each search handed the lock to another thread and
    waited to get it back; in gunicorn's threaded workers that cost a cached type-ahead answer
    about 12 µs of server CPU and a context switch (issue 43 item 6). A forked child forgets the
    parent's bytes (os.register_at_fork), so no two processes ever hand out the same ones."""

    BLOCK = 4096

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._buffer, self._position = b"", 0

    def take(self, n: int) -> bytes:
        with self._lock:
            start = self._position
            if start + n > len(self._buffer):
                self._buffer, start = os.urandom(max(self.BLOCK, n)), 0
            self._position = start + n
            return self._buffer[start:start + n]


_random_bytes = RandomBytes()


def new_search_id(now_ns: int | None = None) -> str:
    """An opaque, unguessable search id of 22 characters that sorts by time: 48 bits of Unix
    milliseconds then 80 random bits (the layout of a UUIDv7, RFC 9562 section 5.7), written
    in base64url's 64 characters re-ordered as ASCII orders them, so that ids compare like the
    bytes they encode.

    Why time first: the id is the search log's primary key, and a B-tree that receives random
    keys touches a random page per insert; measured on SQLite, a random 128-bit key cost the
    writer 10 µs per row at 80,000 rows and 17 µs at 400,000 (and rising), a time-ordered one a
    flat 8.5 µs (docs/design/performance.md). 80 random bits per millisecond keep ids
    unguessable; they come from os.urandom, as `secrets.token_bytes` takes them, a block at a
    time (RandomBytes)."""
    millis = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    raw = millis.to_bytes(6, "big") + _random_bytes.take(10)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").translate(_SORTABLE).decode("ascii")



@dataclass(frozen=True)
class SearchRecord:
    """One answered search. `rerank` False marks a type-ahead keystroke (rerank=0), True the
    final search (Enter, or after a pause). `no_confident_match`: the abstention model answered
    nothing rather than a wrong task."""

    id: str
    at: datetime
    session_id: str | None
    query: str
    rerank: bool
    result_ids: tuple[str, ...]
    no_confident_match: bool = False
    degraded: tuple[str, ...] = ()
    person: str | None = None   # the verified person's keyed pseudonym (analytics.sources.person_pseudonym)

    @property
    def no_result(self) -> bool:
        """No task shown: an empty result list, or "no confident match"."""
        return self.no_confident_match or not self.result_ids


def search_record(response: dict, session_id: str | None, at: datetime, person: str | None = None) -> SearchRecord:
    """What the search log keeps of a /api/search response body (serving.service's `search`),
    under a fresh search id; `person`: the pseudonym of the person the request verified."""
    return SearchRecord(id=new_search_id(), at=at, session_id=session_id, query=normalise_query(response["query"]),
                        rerank=bool(response["rerank"]["requested"]),
                        result_ids=tuple(row["id"] for row in response["results"]),
                        no_confident_match=bool(response["no_confident_match"]),
                        degraded=tuple(response["degraded"]), person=person)


@dataclass(frozen=True)
class EventRecord:
    """One widget event about a search's results: impression (query, task_ids shown), click
    (task_id, 1-based position), dwell (task_id, dwell_ms on the task's page) or return (the
    user came back from task_id to the results). `at` is when the server received it."""

    at: datetime
    search_id: str
    type: str
    session_id: str | None = None
    task_id: str | None = None
    position: int | None = None
    dwell_ms: int | None = None
    query: str | None = None
    task_ids: tuple[str, ...] | None = None
    network: str | None = None   # keyed pseudonym of the sender's network (analytics.sources.network_pseudonym)

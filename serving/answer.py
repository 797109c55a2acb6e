"""Answer: one search's response, split into what the pipeline decided and what is per response.

    body        everything the ranking decided (query, results, weights, ranker, re-rank...): a
                pure function of (index, query, k, roles, re-rank outcome). Shared, read-only,
                between the answers the answer cache replays (serving.answer_cache).
    timings_ms  this response's own stage timings.
    encoded     `body` as JSON, encoded once: a cached answer carries the bytes of its first
                encoding, so replaying it costs no encoding of the results again.

`to_json(search_id=..., access=...)` writes the HTTP response: the per-response fields (the
timings and the caller's `extra`) encoded on their own and spliced after the body's bytes,
so that the few kilobytes of results of a cached type-ahead answer are encoded once per index,
not once per keystroke. `as_dict()` is the same response as one dict (CLI, admin, tests).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from infra.json_bytes import encode_json

TIMINGS = "timings_ms"


@dataclass(frozen=True)
class Answer:
    body: Mapping[str, Any]
    timings_ms: dict[str, float]
    encoded: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if TIMINGS in self.body:
            raise ValueError(f"an answer's body may not hold {TIMINGS!r}: it is per response")

    def with_encoding(self) -> "Answer":
        """This answer with its body's JSON (what the answer cache keeps)."""
        return self if self.encoded is not None else replace(self, encoded=encode_json(self.body))

    def as_dict(self) -> dict[str, Any]:
        """The response as a new dict (its nested values are the body's: read them only)."""
        return {**self.body, TIMINGS: self.timings_ms}

    def to_json(self, **extra: Any) -> bytes:
        """The response with `extra` top-level fields as compact UTF-8 JSON: a JSON object with
        the body's keys, then `timings_ms` and the keys of `extra`. A key of `extra` that the
        body already has is a ValueError, never a duplicate key."""
        clash = extra.keys() & self.body.keys()
        if clash or TIMINGS in extra:
            raise ValueError(f"response fields {sorted(clash or {TIMINGS})} are already in the answer")
        tail = encode_json({TIMINGS: self.timings_ms, **extra})
        body = self.encoded if self.encoded is not None else encode_json(self.body)
        if body == b"{}":
            return tail
        return body[:-1] + b"," + tail[1:]

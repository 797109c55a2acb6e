"""The values that cross the boundary between the search pipeline and the re-ranker."""
from __future__ import annotations

from dataclasses import dataclass

#: `RerankOutcome.degraded` values. Transport-level trouble (timeout, connection refused, HTTP
#: error, open circuit, no endpoint) is "unavailable"; an answer that arrived but cannot be used
#: (malformed JSON, wrong shape, every entry dropped) is "invalid". Either way the caller gets the
#: prefilter order, so search keeps working without the LLM.
UNAVAILABLE = "rerank_unavailable"
INVALID = "rerank_invalid"


@dataclass(frozen=True)
class Candidate:
    """One shortlist entry; `idx` is its 0-based position in the shortlist."""

    idx: int
    task_id: str
    name: str
    help: str


@dataclass(frozen=True)
class Example:
    """An in-context example taken from a training test case (empty gold: out of scope)."""

    query: str
    gold_names: tuple[str, ...]
    rationale: str


@dataclass
class RerankOutcome:
    """What one re-rank request produced.

    `order` is always a permutation of all shortlist indices, whatever happened, so the caller
    can map it straight back onto the shortlist without further checks.
    """

    order: list[int]
    llm_order: list[int]
    reasons: dict[int, str]
    degraded: str | None
    dropped: dict[str, int]
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    skipped: str | None
    model: str

    @classmethod
    def prefilter(
        cls,
        size: int,
        *,
        model: str,
        skipped: str | None = None,
        degraded: str | None = None,
    ) -> "RerankOutcome":
        """The prefilter order unchanged: used when the LLM was skipped, failed or had no say. It
        cost nothing; what a failed attempt did cost (entries dropped, latency, tokens) its caller
        sets on the result with dataclasses.replace (Reranker._degraded).

        The pipeline uses it too, e.g. `RerankOutcome.prefilter(k, model=m,
        skipped="confident_prefilter")` when search.confidence.skip_rerank says the call is not needed.
        """
        return cls(
            order=list(range(size)),
            llm_order=[],
            reasons={},
            degraded=degraded,
            dropped={},
            latency_ms=0.0,
            prompt_tokens=0,
            completion_tokens=0,
            cached=False,
            skipped=skipped,
            model=model,
        )

"""The constrained LLM re-ranker (paper §3.4): shortlist in, a permutation of the shortlist out.

Final order rule: the validated LLM entries first, in the order the LLM listed them (array
order; the `rank` field is requested to help the model think in ranks but is not trusted for
ordering), then every remaining shortlist entry in prefilter order. An empty valid answer
("no entry fits") therefore keeps the prefilter order and is *not* a degradation.

`rerank` never raises for anything the endpoint does. Whatever goes wrong, the caller gets the
prefilter order and a reason:

    degraded="rerank_unavailable"  timeout, connection error, HTTP error, circuit open (skipped=
                                   "circuit_open") or no endpoint configured (skipped="no_endpoint")
    degraded="rerank_invalid"      the answer arrived but was malformed JSON, had the wrong shape,
                                   or every entry in it was dropped by validation

Flow per call: cache lookup -> circuit breaker -> one chat completion (with response-format
fallback) -> validation -> cache store (usable answers only).
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Sequence

import diskcache

from settings import Settings

if TYPE_CHECKING:
    import openai

from infra.breaker import OPEN, CircuitBreaker
from .cache import RerankCache, cache_key
from infra.chat import ChatClient, LLMUnavailable
from .prompt import build_messages
from .records import INVALID, UNAVAILABLE, Candidate, Example, RerankOutcome
from .schema import SCHEMA_NAME, grammar_schema, response_schema
from .validate import check_answer

log = logging.getLogger(__name__)

#: The default completion budget is sized per request to fit an answer listing the whole
#: shortlist (an entry with a short reason takes ~35-40 tokens with the Gemma tokenizer): a
#: cut-off answer is malformed JSON and would waste the call. It also bounds latency.
ANSWER_BASE_TOKENS = 32
TOKENS_PER_ENTRY = 48


class Reranker:
    def __init__(
        self,
        settings: Settings,
        cache: diskcache.Cache | None = None,
        client: openai.OpenAI | None = None,
        *,
        max_tokens: int | None = None,
        breaker: CircuitBreaker | None = None,
    ):
        """`cache=None` disables caching; `client` overrides the one built from settings;
        `max_tokens` fixes the completion budget (default: sized to the shortlist); `breaker`
        replaces the one built from settings (the app passes one that reports to its metrics).

        The client, injected or not, always runs with settings.llm_timeout_s and no retries:
        retrying is the circuit breaker's business, and a retry would double the worst case.
        An empty LLM_API_KEY is sent as a placeholder, which local servers ignore.
        """
        self._model = settings.llm_model
        if client is None and settings.llm_base_url:
            import openai  # ~0.5 s of imports, paid only where an endpoint is configured (CLI start-up)

            client = openai.OpenAI(base_url=settings.llm_base_url, api_key=settings.llm_api_key or "unused")
        self._chat = None
        if client is not None:
            client = client.with_options(timeout=settings.llm_timeout_s, max_retries=0)
            self._chat = ChatClient(client, settings.llm_model, settings.llm_response_format)
        self._max_tokens = max_tokens
        self._cache = RerankCache(cache)
        self._breaker = breaker or CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)

    def available(self) -> bool:
        """An endpoint is configured and the circuit is not open (closed, or due a trial call)."""
        return self._chat is not None and self._breaker.state != OPEN

    @property
    def circuit_state(self) -> str:
        """The breaker state, "closed", "open" or "half_open", for health checks and metrics."""
        return self._breaker.state

    def rerank(self, query: str, candidates: Sequence[Candidate], examples: Sequence[Example]) -> RerankOutcome:
        """Re-rank the shortlist; `candidates[i].idx` must be `i` (ValueError otherwise)."""
        if any(c.idx != position for position, c in enumerate(candidates)):
            raise ValueError("candidates must be numbered 0..n-1 in shortlist order")
        size = len(candidates)
        if size == 0:
            return RerankOutcome.prefilter(0, model=self._model, skipped="empty_shortlist")
        if self._chat is None:
            return RerankOutcome.prefilter(size, model=self._model, skipped="no_endpoint", degraded=UNAVAILABLE)

        started = time.perf_counter()
        key = cache_key(self._model, query, candidates, examples)
        if (hit := self._cache.get(key)) is not None:
            return self._ranked(size, hit, {}, started, 0, 0, cached=True)
        if not self._breaker.allow():
            return RerankOutcome.prefilter(size, model=self._model, skipped="circuit_open", degraded=UNAVAILABLE)

        try:
            schema = response_schema(candidates)
            reply = self._chat.complete(
                partial(build_messages, query, candidates, examples),
                schema,
                max_tokens=self._max_tokens or ANSWER_BASE_TOKENS + TOKENS_PER_ENTRY * size,
                schema_name=SCHEMA_NAME,
                grammar_schema=grammar_schema(schema),
            )
        except LLMUnavailable as exc:
            self._breaker.record_failure()
            log.warning("LLM re-rank unavailable (%s); keeping prefilter order", exc)
            return self._degraded(size, UNAVAILABLE, started)
        except Exception:  # an unforeseen client failure must not fail the search
            self._breaker.record_failure()
            log.exception("LLM re-rank failed unexpectedly; keeping prefilter order")
            return self._degraded(size, UNAVAILABLE, started)
        self._breaker.record_success()

        verdict = check_answer(reply.content, candidates)
        dropped = dict(verdict.dropped)
        if dropped:
            log.info("LLM re-rank dropped entries: %s", dropped)
        if not verdict.usable:
            log.warning("LLM re-rank answer unusable (%s); keeping prefilter order", dropped)
            return self._degraded(size, INVALID, started, dropped, reply.prompt_tokens, reply.completion_tokens)
        self._cache.put(key, verdict.accepted)
        return self._ranked(size, verdict.accepted, dropped, started, reply.prompt_tokens, reply.completion_tokens)

    def _ranked(
        self,
        size: int,
        accepted: list[tuple[int, str]],
        dropped: dict[str, int],
        started: float,
        prompt_tokens: int,
        completion_tokens: int,
        cached: bool = False,
    ) -> RerankOutcome:
        llm_order = [idx for idx, _ in accepted]
        chosen = set(llm_order)
        return RerankOutcome(
            order=llm_order + [idx for idx in range(size) if idx not in chosen],
            llm_order=llm_order,
            reasons=dict(accepted),
            degraded=None,
            dropped=dict(dropped),
            latency_ms=_ms_since(started),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached=cached,
            skipped=None,
            model=self._model,
        )

    def _degraded(
        self,
        size: int,
        reason: str,
        started: float,
        dropped: dict[str, int] | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> RerankOutcome:
        return replace(
            RerankOutcome.prefilter(size, model=self._model, degraded=reason),
            dropped=dict(dropped or {}),
            latency_ms=_ms_since(started),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0

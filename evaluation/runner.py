"""Run configurations over held-out cases against a throw-away store.

`throwaway_service` creates a temporary SQLite file, migrates it (catalog.db.upgrade), fills
it with the catalog and the TRAINING cases only, and wraps it in a SearchService that shares
the live embedder (so embeddings come from, and go to, the live cache). The lexicon and the
in-context examples are therefore built from training cases only; the live database is never
opened for writing (it is only read, when no files are given).
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from tqdm import tqdm

from catalog.db import make_engine, upgrade
from catalog.records import CaseRecord, TaskRecord
from catalog.store import CatalogStore
from kb.enrich import catalog_enrichment
from infra.metrics import Metrics
from search.fitting import cases_digest
from search.ranker import RankerParams
from search.request import SearchRequest
from serving.service import SearchService
from settings import Settings

from .configs import ConfigSpec

DEFAULT_DEPTH = 20


@dataclass
class QueryRun:
    query: str
    gold: tuple[str, ...]
    category: str | None
    ranking: list[str]
    scores: list[float]
    latency_ms: float
    extra: dict = field(default_factory=dict)


@dataclass
class ConfigRun:
    spec: ConfigSpec
    rows: list[QueryRun] = field(default_factory=list)
    skipped: str | None = None
    model: str | None = None
    notes: dict = field(default_factory=dict)


def progress(iterable, desc: str, enabled: bool, total: int | None = None):
    return tqdm(iterable, desc=desc, total=total, file=sys.stderr, disable=not enabled, leave=False,
                dynamic_ncols=True)


@contextmanager
def throwaway_service(settings: Settings, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord],
                      embedder, reranker=None, params: RankerParams | None = None
                      ) -> Iterator[tuple[CatalogStore, SearchService]]:
    """A SearchService over a temporary store holding `tasks` and `train`, ranking with `params`
    (stored as the store's fit; no background refit)."""
    with tempfile.TemporaryDirectory(prefix="taskfinder-eval-") as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'eval.db'}")
        service = None
        try:
            upgrade(engine)
            store = CatalogStore(engine)
            store.import_tasks(list(tasks))
            store.import_cases(list(train))
            if params is not None:
                store.save_fit(store.revision(), cases_digest(store.tasks(), store.cases()), params.as_dict(), {})
            # Rankings are scored whole; abstention is evaluated separately.
            service = SearchService(settings.with_overrides(rerank_default=False, abstain=False, auto_fit=False),
                                    store, embedder, reranker, Metrics(), enrichment=catalog_enrichment(settings))
            yield store, service
        finally:
            if service is not None:   # its revision watcher polls the store: stopped before the file goes
                service.close()
            engine.dispose()


def run_rerank_config(spec: ConfigSpec, service: SearchService, cases: Sequence[CaseRecord], depth: int,
                      show: bool, model: str) -> ConfigRun:
    run = ConfigRun(spec, model=model)
    outcomes: dict[str, int] = {}
    dropped: dict[str, int] = {}
    kept = 0
    llm_ms: list[float] = []
    cache_hit_ms: list[float] = []
    for case in progress(cases, spec.name, show):
        # a held-out case is submitted, every role's tasks visible, as in the deterministic replay
        body = service.serve(SearchRequest.of_case(case.query, k=depth), rerank=True).as_dict()
        info = body["rerank"]
        key = "applied" if info.get("applied") else (info.get("skipped") or
                                                     next(iter(body["degraded"]), None) or "not_applied")
        outcomes[key] = outcomes.get(key, 0) + 1
        if "latency_ms" in info and not info.get("skipped"):
            (cache_hit_ms if info.get("cached") else llm_ms).append(info["latency_ms"])
            kept += len(info.get("llm_order", []))
            for reason, count in info.get("dropped", {}).items():
                dropped[reason] = dropped.get(reason, 0) + count
        run.rows.append(QueryRun(case.query, case.gold, case.category, [r["id"] for r in body["results"]],
                                 [r["score"] for r in body["results"]], body["timings_ms"]["total"],
                                 {"rerank": key, "degraded": list(body["degraded"])}))
    returned = kept + sum(dropped.values())
    run.notes.update(
        rerank_outcomes=outcomes,
        llm_entries_returned=returned,
        llm_entries_dropped=dict(sorted(dropped.items())),
        llm_dropped_share=round(sum(dropped.values()) / returned, 4) if returned else None,
        llm_call_ms_p50=round(float(np.median(llm_ms)), 1) if llm_ms else None,
        llm_calls=len(llm_ms),
        cache_hit_ms_p50=round(float(np.median(cache_hit_ms)), 3) if cache_hit_ms else None,
        cache_hits=len(cache_hit_ms),
    )
    return run


def llm_reachable(settings: Settings, timeout_s: float | None = None) -> tuple[bool, str]:
    """(True, '') when LLM_BASE_URL is set and answers a models listing in time (default: the
    LLM timeout, at most 30 s: a single-slot local server answers only between completions)."""
    timeout_s = timeout_s or max(5.0, min(settings.llm_timeout_s, 30.0))
    if not settings.llm_base_url:
        return False, "LLM_BASE_URL is not set"
    try:
        import openai

        client = openai.OpenAI(base_url=settings.llm_base_url, api_key=settings.llm_api_key or "unused",
                               timeout=timeout_s, max_retries=0)
        client.models.list()
    except Exception as exc:  # any failure means: skip the LLM configurations
        return False, f"LLM endpoint {settings.llm_base_url} unreachable: {type(exc).__name__}"
    return True, ""


_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\d+\s*[-:])\s*")


def parse_names(answer: str) -> list[str]:
    """One task name per line; list markers ("1.", "-", "*"), quotes and trailing periods stripped."""
    names = []
    for line in (answer or "").splitlines():
        line = _LIST_MARKER.sub("", line).strip().strip("\"'`*").strip()
        if line.endswith(".") and not line.endswith(".."):
            line = line[:-1].strip()
        if line:
            names.append(line)
    return names


class LLMDirect:
    """The `llm_direct` baseline of paper Table 1: the whole catalog (task names) in one prompt,
    the model asked for the 5 best names. Answered names are mapped to ids by exact match (after
    stripping list markers; case-insensitive as a second chance); unmatched names count as
    misses. No shortlist, no schema, no validation. Answers are cached on disk."""

    def __init__(self, settings: Settings, tasks: Sequence[TaskRecord], cache=None, max_tokens: int = 120):
        import openai

        self.model = settings.llm_model
        self._client = openai.OpenAI(base_url=settings.llm_base_url, api_key=settings.llm_api_key or "unused",
                                     timeout=max(settings.llm_timeout_s, 120.0), max_retries=0)
        self._cache = cache
        self._max_tokens = max_tokens
        self._by_name: dict[str, str] = {}
        self._by_folded: dict[str, str] = {}
        for task in tasks:
            self._by_name.setdefault(task.name, task.id)
            self._by_folded.setdefault(task.name.casefold(), task.id)
        listing = "\n".join(f"- {task.name}" for task in tasks)
        self.system = ("You help users find tasks in a software catalog. Answer with the names of the 5 "
                       "tasks that best match the request, best first, one name per line, copied exactly "
                       "from the catalog. Write nothing else.")
        self.catalog_block = f"Catalog:\n{listing}\n"

    def messages(self, query: str) -> list[dict]:
        return [{"role": "system", "content": self.system},
                {"role": "user", "content": f"{self.catalog_block}\nRequest: {query}\nThe 5 best task names:"}]

    def ask(self, query: str) -> tuple[str, bool]:
        messages = self.messages(query)
        key = ("llm_direct", self.model, hashlib.sha256(json.dumps(messages).encode()).hexdigest())
        if self._cache is not None and (hit := self._cache.get(key)) is not None:
            return hit, True
        reply = self._client.chat.completions.create(model=self.model, messages=messages, temperature=0.0,
                                                     max_tokens=self._max_tokens)
        answer = reply.choices[0].message.content or ""
        if self._cache is not None:
            self._cache.set(key, answer)
        return answer, False

    def map_names(self, names: Sequence[str]) -> tuple[list[str], int]:
        ids, unmatched = [], 0
        for name in names:
            task_id = self._by_name.get(name) or self._by_folded.get(name.casefold())
            if task_id is None:
                unmatched += 1
            elif task_id not in ids:
                ids.append(task_id)
        return ids[:5], unmatched


def run_llm_direct(spec: ConfigSpec, llm: LLMDirect, cases: Sequence[CaseRecord], show: bool) -> ConfigRun:
    run = ConfigRun(spec, model=llm.model)
    unmatched = errors = 0
    for case in progress(cases, spec.name, show):
        started = time.perf_counter()
        try:
            answer, cached = llm.ask(case.query)
        except Exception as exc:  # an unavailable endpoint is a miss, counted
            answer, cached = "", False
            errors += 1
        latency = (time.perf_counter() - started) * 1000.0
        ids, missed = llm.map_names(parse_names(answer))
        unmatched += missed
        run.rows.append(QueryRun(case.query, case.gold, case.category, ids, [float(5 - i) for i in range(len(ids))],
                                 latency, {}, {"answer": answer[:500], "unmatched": missed, "cached": cached}))
    run.notes.update(unmatched_names=unmatched, errors=errors)
    return run

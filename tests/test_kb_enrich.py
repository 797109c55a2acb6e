"""LLM enrichment against a real loopback OpenAI-compatible server: resumable after a kill
(nothing lost, nothing repeated), failures retried, response-format fallback, query-side
expansion through the DF filter, SAGE keywords, task-catalog enrichment."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from catalog.records import TaskRecord
from evaluation.corpus import evaluate_corpus
from kb.enrich import EnrichOptions, enrich_corpus, enrich_tasks
from kb.jobs import JobOptions, cache_key, open_cache
from kb.llm import LLM
from kb.search import KB, KBConfig
from kb.store import CorpusStore
from settings import Settings

FIX = Path(__file__).parent / "fixtures" / "kb"
ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("kb_fake_openai", FIX / "fake_openai.py")
fake_openai = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_openai)
FakeLLM = fake_openai.FakeLLM


class Killed(Exception):
    pass


def setup_corpus(tmp_path, base_url="", **env):
    settings = Settings.from_env({"TASKFINDER_DATA_DIR": str(tmp_path), "LLM_BASE_URL": base_url,
                                  "LLM_MODEL": "fake-model", **env})
    store = CorpusStore(settings.data_dir)
    store.ingest("mini", beir_dir=FIX / "mini_beir")
    return settings, store


def cached_docs(settings, store, kind="doc", mode="fact_checking"):
    cache = open_cache(settings.cache_dir)
    return sum(cache_key(kind, "fake-model", mode, d.hash) in cache for d in store.documents("mini"))


def test_enrichment_resumes_after_kill_without_losing_or_repeating(tmp_path):
    with FakeLLM() as fake:
        settings, store = setup_corpus(tmp_path, fake.base_url)
        llm, cache = LLM.from_settings(settings), open_cache(settings.cache_dir)
        seen = []

        def kill_after_5(doc_id, ok):
            seen.append(doc_id)
            if len(seen) == 5:
                raise Killed

        with pytest.raises(Killed):
            enrich_corpus(store, "mini", llm, cache, "fake-model",
                          job=JobOptions(concurrency=3, progress=False, on_result=kill_after_5))
        first = fake.requests
        assert 5 <= first < 12
        assert cached_docs(settings, store) == first          # every answered request was kept
        rep = enrich_corpus(store, "mini", llm, cache, "fake-model", job=JobOptions(concurrency=3, progress=False))
        assert rep["job"]["cached"] == first and rep["job"]["requested"] == 12 - first
        assert fake.requests == 12                             # nothing repeated
        assert rep["job"]["prompt_tokens"] > 0 and rep["job"]["failed"] == 0
        assert rep["injected"]["docs"] >= 4
        rep = enrich_corpus(store, "mini", llm, cache, "fake-model", job=JobOptions(progress=False))
        assert fake.requests == 12 and rep["job"]["requested"] == 0
    # enriched postings make d1 findable by vocabulary absent from its text
    kb = KB(settings, use_llm=False)
    assert kb.search("mini", "myocardial infarction", 3, "bm25")["results"] == []
    out = kb.search("mini", "myocardial infarction", 3, "enriched")
    assert out["results"][0]["id"] == "d1"
    assert {m["term"] for m in out["results"][0]["matched"]} >= {"myocardi", "infarct", "myocardi_infarct"}
    assert "myocardial" not in (tmp_path / "corpora" / "mini" / "documents.jsonl").read_text()


def test_enrichment_survives_sigkill_of_the_process(tmp_path):
    with FakeLLM(delay_s=0.15) as fake:
        settings, store = setup_corpus(tmp_path, fake.base_url)
        code = ("import sys; from pathlib import Path; from settings import Settings; from kb.store import CorpusStore;"
                "from kb.llm import LLM; from kb.enrich import enrich_corpus; from kb.jobs import JobOptions, open_cache;"
                f"s = Settings.from_env({{'TASKFINDER_DATA_DIR': {str(tmp_path)!r}, 'LLM_BASE_URL': {fake.base_url!r},"
                " 'LLM_MODEL': 'fake-model'});"
                "enrich_corpus(CorpusStore(s.data_dir), 'mini', LLM.from_settings(s), open_cache(s.cache_dir),"
                " 'fake-model', job=JobOptions(concurrency=1, progress=False))")
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
        deadline = time.time() + 20
        while fake.requests < 5 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = fake.requests
        assert 5 <= killed_at < 12
        saved = cached_docs(settings, store)
        assert saved >= killed_at - 1                          # at most the one in flight is lost
        rep = enrich_corpus(store, "mini", LLM.from_settings(settings), open_cache(settings.cache_dir),
                            "fake-model", job=JobOptions(concurrency=1, progress=False))
        assert rep["job"]["requested"] == 12 - saved
        assert cached_docs(settings, store) == 12
        assert fake.requests - 12 <= 1                         # repeats: at most the in-flight request


def test_failures_recorded_and_retried_next_run(tmp_path):
    with FakeLLM(fail_markers=("Malaria vaccine",)) as fake:
        settings, store = setup_corpus(tmp_path, fake.base_url)
        llm, cache = LLM.from_settings(settings), open_cache(settings.cache_dir)
        rep = enrich_corpus(store, "mini", llm, cache, "fake-model", job=JobOptions(progress=False))
        assert rep["job"]["failed"] == 1 and "d4" in rep["job"]["failures"]
        assert "d4" in (tmp_path / "corpora" / "mini" / "enrich_failures.sira.json").read_text()
        fake.fail_markers.clear()
        before = fake.requests
        rep = enrich_corpus(store, "mini", llm, cache, "fake-model", job=JobOptions(progress=False))
        assert fake.requests - before == 1 and rep["job"]["succeeded"] == 1


def test_json_schema_rejected_falls_back_to_json_object(tmp_path):
    with FakeLLM(reject_json_schema=True) as fake:
        settings, store = setup_corpus(tmp_path, fake.base_url)
        rep = enrich_corpus(store, "mini", LLM.from_settings(settings), open_cache(settings.cache_dir),
                            "fake-model", EnrichOptions(limit=3), JobOptions(concurrency=1, progress=False))
        assert rep["job"]["succeeded"] == 3 and rep["job"]["failed"] == 0
        assert fake.formats[0] == "json_schema" and set(fake.formats[1:]) == {"json_object"}  # + schema key
        assert fake.requests == 4


def test_query_expansion_sage_and_modes(tmp_path):
    with FakeLLM() as fake:
        settings, store = setup_corpus(tmp_path, fake.base_url)
        kb = KB(settings, config=KBConfig(max_df=0.5, lam=0.3))
        enrich_corpus(store, "mini", kb.llm, kb.cache, "fake-model", job=JobOptions(progress=False))
        out = kb.search("mini", "heart attack outcomes", 5, "enriched_qe")
        kept = {k["term"] for k in out["expansion"]["kept"]}
        assert "myocardial infarction" in kept                 # exists only via enrichment postings
        assert all(k["df"] >= 1 for k in out["expansion"]["kept"])
        assert out["results"][0]["id"] == "d1"
        sources = {q["source"] for q in out["query_terms"]}
        assert {"query", "expansion"} <= sources
        # text-view qe: the same proposal has df 0 there and is dropped by the DF filter
        out = kb.search("mini", "heart attack outcomes", 5, "qe")
        assert "myocardial infarction" in {d["term"] for d in out["expansion"]["dropped"]}
        requests = fake.requests
        kb.search("mini", "heart attack outcomes", 5, "qe")
        assert fake.requests == requests                      # query expansions are cached
        # SAGE: eight keywords as prepended bag-of-words postings
        enrich_corpus(store, "mini", kb.llm, kb.cache, "fake-model", EnrichOptions(variant="sage"),
                      JobOptions(progress=False))
        out = kb.search("mini", "alpha keyword", 3, "sage")
        assert len(out["results"]) == 3
        res = evaluate_corpus(kb, "mini", [{"_id": "q1", "text": "Myocardial infarction survivors"}],
                              {"q1": {"d1": 1}}, ["bm25", "enriched", "enriched_qe", "qe", "sage"])
        assert res["modes"]["enriched"]["ndcg@10"] == 1.0
        assert res["modes"]["bm25"]["ndcg@10"] < 1.0


def test_task_catalog_enrichment(tmp_path):
    records = [TaskRecord("t1", "Request paid time off", "Submit a PTO request", "HR", ("leave",)),
               TaskRecord("t2", "Reset password", "Reset your password for the HR portal", "IT"),
               TaskRecord("t3", "Expense report", "File an expense report", "Finance")]
    with FakeLLM() as fake:
        settings = Settings.from_env({"TASKFINDER_DATA_DIR": str(tmp_path), "LLM_BASE_URL": fake.base_url,
                                      "LLM_MODEL": "fake-model"})
        llm, cache = LLM.from_settings(settings), open_cache(settings.cache_dir)
        out = enrich_tasks(records, llm, cache, "fake-model", max_df=0.5)
        assert fake.requests == 3
        assert ("vacation leave", 1.0) in out["t1"] and ("login credentials", 1.0) in out["t2"]
        assert out["t3"] == [("generic", 1.0)]
        assert enrich_tasks(records, llm, cache, "fake-model", max_df=0.5) == out
        assert fake.requests == 3                             # cached per task content hash
        assert "task" in fake.prompts[0].lower()
    assert enrich_tasks(records, None, cache, "fake-model", max_df=0.5) == out   # cache only, no LLM


def test_terms_proposed_for_too_many_documents_are_dropped_everywhere():
    """The DF bound applies to the enriched view too: a phrase injected into most documents
    (what a weak model does when it repeats itself) would be as useless as a stopword."""
    from kb.df import bound_enriched_df
    from kb.index import DocInput, Index

    index = Index()
    index.update([DocInput(f"d{i}", f"h{i}", text) for i, text in enumerate(
        ["statins lower cholesterol", "insulin resistance in obesity", "smoking and lung cancer",
         "exercise improves fitness"])])
    proposals = {"d0": [("re elected board", 1.0), ("hmg coa reductase", 1.0)],
                 "d1": [("re elected board", 1.0), ("hyperinsulinemia", 1.0)],
                 "d2": [("re elected board", 1.0), ("tobacco", 1.0)],
                 "d3": [("physical activity", 1.0)]}
    kept, dropped = bound_enriched_df(index, proposals, max_df=0.5)
    assert dropped == 3
    assert kept == {"d0": [("hmg coa reductase", 1.0)], "d1": [("hyperinsulinemia", 1.0)],
                    "d2": [("tobacco", 1.0)], "d3": [("physical activity", 1.0)]}


def test_query_expansion_stops_calling_a_failing_llm_during_the_cooldown(tmp_path):
    with FakeLLM(fail_markers=("QUERY:",)) as fake:  # every query-side request fails (HTTP 500)
        settings, store = setup_corpus(tmp_path, fake.base_url, LLM_BREAKER_FAILURES="2",
                                        LLM_BREAKER_COOLDOWN_S="600")
        kb = KB(settings)
        for query in ("heart attack outcomes", "statins cardiovascular events"):
            out = kb.search("mini", query, 5, "qe")
            assert out["expansion"]["source"] == "none" and "LLM failed" in out["expansion"]["note"]
            assert out["results"]  # the plain query still answers
        calls = fake.requests
        notes = [kb.search("mini", query, 5, "qe")["expansion"]["note"]
                 for query in ("malaria vaccine trial", "vitamin d bone density", "heart attack outcomes")]
        assert fake.requests == calls  # not called again during the cooldown
        assert all("circuit open" in note for note in notes)


def test_catalog_enrichment_reaches_a_running_server(tmp_path):
    """`corpus enrich-catalog` writes the enrichment into the cache, outside the store; it bumps
    the store revision so that a serving process rebuilds its index with the new vocabulary."""
    from tests.conftest import build_app, make_settings

    records = [TaskRecord("t1", "Request paid time off", "Submit a PTO request", "HR", ("leave",)),
               TaskRecord("t2", "Reset password", "Reset your password for the HR portal", "IT"),
               TaskRecord("t3", "Expense report", "File an expense report", "Finance")]
    with FakeLLM() as fake:
        settings = make_settings(tmp_path, tmp_path / "cache", CATALOG_ENRICHMENT=1, LLM_BASE_URL=fake.base_url,
                                 LLM_MODEL="fake-model", EMBEDDINGS_ENABLED=0, ABSTAIN=0)
        app = build_app(settings, records, [])
        service = app.extensions["taskfinder"].search
        before = service.live()
        assert enriched_matches(service.search("holiday request")) == set()

        result = app.test_cli_runner().invoke(args=["corpus", "enrich-catalog", "--max-df", "0.5"])
        assert result.exit_code == 0, result.output
        assert fake.requests == 3

    service.search("holiday request")  # the request that notices the new revision starts the rebuild
    live = service.live(wait=True)
    assert live.revision == before.revision + 1
    assert enriched_matches(service.search("holiday request")) == {("t1", "holiday"), ("t1", "request")}


def enriched_matches(body) -> set[tuple[str, str]]:
    return {(r["id"], m["term"]) for r in body["results"] for m in r["matched"] if m["field"] == "enriched"}

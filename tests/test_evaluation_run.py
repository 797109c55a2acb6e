"""The evaluate command on tiny fixtures: JSON contract, no held-out leakage, fast ranking ==
prefilter, error classes, the CLINC150 adapter and the adaptation fixture."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from catalog.formats import load_cases_file, load_tasks_file
from catalog.records import CaseRecord, TaskRecord
from evaluation import clinc150, configs, errors
from evaluation import evaluate as evaluate_module
from evaluation.adaptation import load_fixture
from evaluation.fastrank import signal_block
from catalog.splits import holdout_split
from lexicon.rationale import build_lexicon
from search.index import build_index
from search.prefilter import prefilter
from settings import FieldWeights, Weights
from tests.conftest import make_settings

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
CATALOG = FIXTURES / "tiny_catalog.jsonl"
CASES = FIXTURES / "tiny_cases.jsonl"


@pytest.fixture
def eval_app(tmp_path, shared_cache_dir):
    from app import create_app
    from evaluation.cli import evaluate_command

    app = create_app(make_settings(tmp_path, shared_cache_dir))
    if "evaluate" not in app.cli.commands:
        app.cli.add_command(evaluate_command)
    return app


def test_json_contract_and_files(eval_app, tmp_path, monkeypatch):
    seen_store_cases = []
    real = evaluate_module.throwaway_service

    def spy(settings, tasks, train, embedder, reranker=None):
        ctx = real(settings, tasks, train, embedder, reranker)

        class Wrapped:
            def __enter__(self):
                store, service = ctx.__enter__()
                seen_store_cases.append([c.query for c in store.cases()])
                return store, service

            def __exit__(self, *exc):
                return ctx.__exit__(*exc)

        return Wrapped()

    monkeypatch.setattr(evaluate_module, "throwaway_service", spy)
    out, json_path = tmp_path / "out", tmp_path / "r.json"
    result = eval_app.test_cli_runner().invoke(args=[
        "evaluate", "--catalog", str(CATALOG), "--cases", str(CASES), "--holdout", "0.3", "--seed", "3",
        "--config", "all", "--out", str(out), "--json", str(json_path), "--no-progress", "--bootstrap", "200",
        "--folds", "3"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    report = json.loads(json_path.read_text())
    assert set(report["configs"]) == set(configs.ALL_CONFIGS)
    for name in configs.DETERMINISTIC:
        c = report["configs"][name]
        for key in ("n", "hit@1", "hit@3", "hit@5", "mrr", "ndcg@10", "oos_fpr", "latency_ms_p50"):
            assert key in c, (name, key)
        assert isinstance(c["n"], int) and c["n"] > 0
        assert 0.0 <= c["hit@1"] <= c["hit@3"] <= c["hit@5"] <= 1.0
        assert (out / f"run.{name}.txt").exists()
    for name in configs.LLM_CONFIGS:   # no LLM_BASE_URL in tests
        assert report["configs"][name]["skipped"]
    data = report["data"]
    for key in ("catalog", "n_tasks", "cases", "n_train", "n_test", "split", "seed", "weights",
                "embedding_model", "llm_model"):
        assert key in data
    assert data["llm_model"] is None and data["seed"] == 3
    # held-out cases never reach the lexicon: the throw-away store holds exactly the training split
    tasks = load_tasks_file(CATALOG)
    train, test = holdout_split(load_cases_file(CASES, {t.id for t in tasks}), 0.3, 3)
    assert seen_store_cases and sorted(seen_store_cases[0]) == sorted(c.query for c in train)
    assert not set(seen_store_cases[0]) & {c.query for c in test}
    assert data["n_train"] == data["store_cases"] == len(train) and data["n_test"] == len(test)
    for name in ("report.md", "qrels.txt", "ablation.png"):
        assert (out / name).exists()


class FixedVector:
    """Stands in for the embedder: this test compares two rankings of the same vector."""

    def __init__(self, vector):
        self.vector = vector

    def embed(self, texts, kind):
        return self.vector[None, :]


def test_fast_ranking_equals_prefilter(demo_tasks, demo_cases):
    train, test = holdout_split(demo_cases, 0.2, 42)
    index = build_index(demo_tasks, build_lexicon(train), FieldWeights())
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(demo_tasks), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = index.with_vectors(vectors)
    for weights in (Weights(), configs.PAPER_WEIGHTS, Weights(1, 0, 0, 0)):
        for case in test[:25] + train[:5]:
            qv = rng.normal(size=8).astype(np.float32)
            expected = [s.task.id for s in prefilter(index, case.query, weights, 10, restrict_roles=False,
                                                     query_vector=qv).ranked]
            block = signal_block(index, case.query, FixedVector(qv))
            assert block.rank(weights, 10) == expected


def _tiny_index(cases):
    tasks = [TaskRecord(id="a", name="Developmental Screening", help="ASQ-3 scores", category="health"),
             TaskRecord(id="b", name="Hearing Screening", help="OAE results", category="health"),
             TaskRecord(id="c", name="Bus Routes", help="stops and routes", category="transportation"),
             TaskRecord(id="d", name="Meal Counts", help="lunch and breakfast", category="nutrition")]
    return build_index(tasks, build_lexicon(cases), FieldWeights())


def _classify(index, query, gold, weights=Weights(1, 0.8, 0, 0.6)):
    block = signal_block(index, query, None)
    fused, _ = block.fused(weights)
    ranking = block.rank(weights, 4)
    return errors.classify(index, block, np.asarray(fused), ranking, query, gold, shortlist_size=4)[0]


def test_error_classes_on_crafted_misses():
    index = _tiny_index([CaseRecord(query="sandwich", gold=("d",), rationale="sandwich lunch")])
    # gold in shortlist, same category as the top result -> ambiguous
    assert _classify(index, "screening", ("b",)) == "ambiguous"
    # no link to gold, an unknown word -> lexical gap
    assert _classify(index, "zorblax", ("c",)) == "lexical_gap"
    # words all known (catalog/lexicon) but none links to the gold task -> missing rationale
    assert _classify(index, "sandwich", ("c",)) == "missing_rationale"


def test_suggested_case_is_a_valid_test_case():
    task = TaskRecord(id="c", name="Bus Routes", help="Plan stops and routes. More text.", category="transportation")
    row = errors.suggest_case("where does the van stop", ("c",), "natural_language", {"c": task}, ["van"])
    assert row["gold"] == ["c"] and "Bus Routes: Plan stops and routes" in row["rationale"] and "van" in row["rationale"]


def test_clinc_adapter(tmp_path):
    data = clinc150.load(FIXTURES / "clinc_tiny")
    assert [t.id for t in data.tasks] == ["balance", "book_flight", "transfer"]
    flight = next(t for t in data.tasks if t.id == "book_flight")
    assert flight.name == "book flight" and flight.help == "" and flight.category == "travel"
    assert len(data.train) == 7 and data.dropped_duplicates == 1       # 6 requests + 1 oos, one duplicate
    assert [c for c in data.train if not c.gold][0].query == "what is the meaning of life"
    assert len(data.test) == 4 and sum(1 for c in data.test if not c.gold) == 1
    assert all(c.rationale == "" for c in data.train)
    capped = clinc150.load(FIXTURES / "clinc_tiny", max_per_intent=1)
    assert len([c for c in capped.train if c.gold]) == 3
    summary = clinc150.export(FIXTURES / "clinc_tiny", tmp_path)
    tasks = load_tasks_file(tmp_path / "catalog.jsonl")
    assert summary["tasks"] == 3 and len(load_cases_file(tmp_path / "val.jsonl", {t.id for t in tasks})) == 4


def test_adaptation_fixture_is_consistent(demo_tasks):
    tasks, queries, teaching = load_fixture()
    assert len(tasks) == 5 and len(queries) >= 15 and 2 * len(tasks) <= len(teaching) <= 3 * len(tasks)
    assert not {t.id for t in tasks} & {t.id for t in demo_tasks}
    per_task = {t.id: sum(1 for c in teaching if t.id in c.gold) for t in tasks}
    assert all(2 <= n <= 3 for n in per_task.values())


def test_config_names():
    assert configs.resolve(["all"]) == list(configs.ALL_CONFIGS)
    assert configs.resolve(["prefilter,lexical"]) == ["lexical", "prefilter"]
    with pytest.raises(ValueError):
        configs.resolve(["nope"])
    specs = configs.config_specs(Weights())
    assert specs["lexical"].weights == Weights(1, 0, 0, 0) and not specs["lexical"].pins
    assert specs["hybrid_no_rationale"].weights.rationale == 0 and specs["prefilter"].weights == Weights()

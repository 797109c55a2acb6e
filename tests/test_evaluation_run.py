"""The evaluate command on tiny fixtures: JSON contract, no held-out leakage, replayed ranking ==
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
from evaluation.replay import heldout_index, heldout_queries, replay_pipeline, run_replay
from catalog.splits import holdout_split
from lexicon.rationale import build_lexicon
from search.fitting import CVQuery
from search.index import build_index
from search.prefilter import fuse, rank_scored, rank_values, score_query, signal_values
from search.query import analyse_query
from search.ranker import default_params
from settings import FieldWeights, Weights
from tests.conftest import make_settings

FIXTURES = Path(__file__).parent / "fixtures" / "eval"
CATALOG = FIXTURES / "tiny_catalog.jsonl"
CASES = FIXTURES / "tiny_cases.jsonl"


@pytest.fixture
def eval_app(tmp_path, shared_cache_dir):
    from app import create_app
    from cli.evaluate import evaluate_command

    app = create_app(make_settings(tmp_path, shared_cache_dir))
    if "evaluate" not in app.cli.commands:
        app.cli.add_command(evaluate_command)
    return app


def test_json_contract_and_files(eval_app, tmp_path, monkeypatch):
    seen = {}
    real_fit, real_index = evaluate_module.fit_ranker, evaluate_module.heldout_index

    def spy_fit(settings, tasks, cases, *args, **kwargs):
        seen["fit"] = [c.query for c in cases]
        return real_fit(settings, tasks, cases, *args, **kwargs)

    def spy_index(settings, tasks, train, *args, **kwargs):
        seen["index"] = [c.query for c in train]
        return real_index(settings, tasks, train, *args, **kwargs)

    monkeypatch.setattr(evaluate_module, "fit_ranker", spy_fit)
    monkeypatch.setattr(evaluate_module, "heldout_index", spy_index)
    out, json_path = tmp_path / "out", tmp_path / "r.json"
    result = eval_app.test_cli_runner().invoke(args=[
        "evaluate", "--catalog", str(CATALOG), "--cases", str(CASES), "--holdout", "0.3", "--seed", "3",
        "--config", "all", "--out", str(out), "--json", str(json_path), "--no-progress", "--bootstrap", "200"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    report = json.loads(json_path.read_text())
    assert set(report["configs"]) == set(configs.ALL_CONFIGS)
    for name in configs.BASELINES + configs.LADDER:
        c = report["configs"][name]
        for key in ("n", "hit@1", "hit@3", "hit@5", "mrr", "ndcg@10", "oos_fpr", "latency_ms_p50"):
            assert key in c, (name, key)
        assert isinstance(c["n"], int) and c["n"] > 0
        assert 0.0 <= c["hit@1"] <= c["hit@3"] <= c["hit@5"] <= 1.0
        assert (out / f"run.{name}.txt").exists()
    for name in configs.LLM_CONFIGS:   # no LLM_BASE_URL in tests
        assert report["configs"][name]["skipped"]
    data = report["data"]
    for key in ("catalog", "n_tasks", "cases", "n_train", "n_test", "split", "seed", "ranker",
                "embedding_model", "llm_model"):
        assert key in data
    assert data["llm_model"] is None and data["seed"] == 3
    assert report["fit"]["status"]
    # held-out cases never reach the fit, the lexicon or the exemplar memory: only the training split does
    tasks = load_tasks_file(CATALOG)
    train, test = holdout_split(load_cases_file(CASES, {t.id for t in tasks}), 0.3, 3)
    assert sorted(seen["fit"]) == sorted(seen["index"]) == sorted(c.query for c in train)
    assert not set(seen["index"]) & {c.query for c in test}
    assert data["n_train"] == len(train) and data["n_test"] == len(test)
    for name in ("report.md", "qrels.txt", "ablation.png"):
        assert (out / name).exists()


class HashEmbedder:
    """Stands in for the embedder: a fixed random unit vector per text, so the replay and the
    prefilter see exactly the same vectors."""

    model = "hash"

    def embed(self, texts, kind):
        out = []
        for text in texts:
            rng = np.random.default_rng(abs(hash((kind, text))) % (2 ** 32))
            v = rng.normal(size=8).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.vstack(out) if out else np.zeros((0, 8), dtype=np.float32)


def test_replayed_ranking_equals_prefilter(demo_tasks, demo_cases, settings):
    """The evaluation's replay (signals once, re-fused per configuration) ranks exactly as the
    live prefilter does, for fixed, fitted-subset and product weights, with and without pins
    (held-out queries as submitted ones: typing=0)."""
    train, test = holdout_split(demo_cases, 0.2, 42)
    embedder = HashEmbedder()
    params = default_params(settings)
    index = heldout_index(settings, demo_tasks, train, embedder, params)
    pipeline = replay_pipeline(settings, index, params, embedder)
    queries, millis = heldout_queries(pipeline, test[:20] + train[:5])
    specs = configs.config_specs(settings.weights)
    for name in ("lexical", "embedding", "neighbour", "prefilter_defaults", "prefilter", "prefilter_sparse"):
        spec = specs[name]
        run = run_replay(spec, pipeline, [], queries, millis, 10)
        for row, query in zip(run.rows, queries):
            vector = None if spec.mode == "sparse" else embedder.embed(
                [analyse_query(index, query.case.query).embedding_text], "query")[0]
            weights = spec.weights if spec.kind == "fixed" else params.weights
            submitted = analyse_query(index, query.case.query, typing=False)   # held-out queries are whole ones
            expected = rank_scored(index, score_query(index, submitted, vector, None, False, use_pins=spec.pins),
                                   weights, 10)
            assert row.ranking == [s.task.id for s in expected.ranked], name


def _tiny_index(cases):
    tasks = [TaskRecord(id="a", name="Developmental Screening", help="ASQ-3 scores", category="health"),
             TaskRecord(id="b", name="Hearing Screening", help="OAE results", category="health"),
             TaskRecord(id="c", name="Bus Routes", help="stops and routes", category="transportation"),
             TaskRecord(id="d", name="Meal Counts", help="lunch and breakfast", category="nutrition")]
    return build_index(tasks, build_lexicon(cases), FieldWeights())


def _classify(index, query, gold, weights=Weights(1, 0.8, 0, 0.6, 0, 0, 0)):
    rows, visible = index.visible(None, restrict=False)
    values = signal_values(index, analyse_query(index, query), rows, None)
    block = CVQuery(CaseRecord(query=query, gold=gold), -1, visible, values, None)
    fused, _ = fuse(values, weights)
    ranking = [item.task.id for item in rank_values(visible, values, weights, 4).ranked]
    return errors.classify(index, block, np.asarray(fused), ranking, block.case, shortlist_size=4)[0]


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
    assert "rerank" not in configs.resolve(["deterministic"])
    with pytest.raises(ValueError):
        configs.resolve(["nope"])
    specs = configs.config_specs(Weights())
    assert specs["lexical"].weights == Weights(1, 0, 0, 0, 0, 0, 0, 0, learned=0, typed=0, begins=0) and not specs["lexical"].pins
    assert specs["prefilter_defaults"].weights == Weights() and specs["prefilter"].kind == "product"
    assert specs["prefilter_sparse"].mode == "sparse" and not specs["prefilter_sparse"].needs_embedding
    assert specs["exemplar"].needs_embedding and not specs["bm25"].needs_embedding


def test_evaluate_measures_the_product_with_embeddings_off(tmp_path, shared_cache_dir):
    """EMBEDDINGS_ENABLED=0 skips only the configurations that need vectors: the product itself
    is measured in its degraded mode, with the weights and abstention fitted for it."""
    from app import create_app

    app = create_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED=0))
    json_path = tmp_path / "r.json"
    result = app.test_cli_runner().invoke(args=[
        "evaluate", "--catalog", str(CATALOG), "--cases", str(CASES), "--holdout", "0.3", "--seed", "3",
        "--config", "prefilter,prefilter_sparse,embedding,bm25", "--json", str(json_path), "--no-progress",
        "--bootstrap", "200"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    configs_ = json.loads(json_path.read_text())["configs"]
    assert configs_["embedding"]["skipped"]
    for name in ("prefilter", "prefilter_sparse", "bm25"):
        assert not configs_[name]["skipped"] and configs_[name]["n"] > 0
    assert configs_["prefilter"]["mrr"] == configs_["prefilter_sparse"]["mrr"]


def test_abstention_operating_point_and_its_held_out_oracle():
    from evaluation.replay import abstention_point
    from evaluation.runner import ConfigRun, QueryRun

    def row(gold, ranking, answered, logit):
        return QueryRun("q", gold, None, ranking, [], 0.0, extra={"answered": answered, "logit": logit})

    run = ConfigRun(configs.config_specs(Weights())["prefilter"])
    run.rows = [row(("a",), ["a"], True, 2.0), row(("a",), ["a"], True, 1.0), row(("a",), ["b"], False, -1.0),
                row((), ["a"], True, 1.5), row((), ["b"], False, -2.0)]
    point = abstention_point(run)
    assert point["hit@5"] == pytest.approx(2 / 3) and point["oos_fpr"] == 0.5
    assert point["in_scope_abstain"] == pytest.approx(1 / 3)
    # a threshold above 1.5 and at most 1.0 cannot both hold: keeping both hits costs the OOS at 1.5
    assert point["oracle_oos_fpr_at_2pts"] == 0.5


def test_the_markdown_report_reads_a_fit_with_typing_and_foreign_weights():
    """`evaluate --out` on the demo: the fit's CV holds the typing weights' figures beside each
    mode's (search.fitting.fit_typing), and the foreign weights' (search.fitting.foreign, whose
    shape made `--out` fail with KeyError 'defaults' on any fit with embeddings); the report
    lists them instead of failing on their shape."""
    from evaluation.report import fit_section

    figures = lambda hit1: {"n": 40, "hit@1": hit1, "mrr": hit1 + 0.05}   # noqa: E731
    fit = {"status": "fitted", "cv": {
        "full": {"defaults": figures(0.7), "fitted": figures(0.8), "tail": {}},
        "typing": {"full": {"whole_weights": figures(0.36), "typing_weights": figures(0.43)}},
        "foreign": {"signals": ["embedding", "centroid"], "fitted": figures(0.55), "own_weights": figures(0.3)}}}
    text = "\n".join(fit_section(fit, {}, {}))
    assert ("queries in another language, 40 masked CV queries (embedding, centroid): the catalog language's "
            "weights Hit@1 0.300") in text and "foreign weights Hit@1 0.550" in text
    assert "full mode, 40 CV queries: shipped defaults Hit@1 0.700" in text
    assert "typed prefixes, full mode, 40 CV cuts: whole-query weights Hit@1 0.360" in text
    assert "typing weights Hit@1 0.430" in text


def test_a_throwaway_service_stops_polling_its_store_before_the_store_is_deleted():
    """evaluation.runner.throwaway_service deletes its temporary SQLite store on exit. The
    service's revision watcher polled that store every REVISION_POLL_S and was left running, so
    a poll could open the file again (recreating its -wal and -shm files) while the directory
    was being removed: `OSError: Directory not empty` failed an evaluation run (seen in the suite
    under load, tests/test_rerank_llama_integration.py). On exit nothing may still poll it."""
    from evaluation.runner import throwaway_service

    tasks = load_tasks_file(CATALOG)
    cases = load_cases_file(CASES, {t.id for t in tasks})
    settings = make_settings(Path("/nonexistent"), Path("/nonexistent"), EMBEDDINGS_ENABLED="0", REVISION_POLL_S="0.01")
    for _ in range(20):
        with throwaway_service(settings, tasks, cases, None) as (store, service):
            service.live(wait=True)
            directory = Path(str(store.engine.url.database)).parent
            assert service.watcher.running()
        assert not service.watcher.running()
        assert not directory.exists()

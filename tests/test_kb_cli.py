"""kb corpora through the `corpus` click group: ingest (BEIR + plain JSONL, all-or-nothing,
incremental re-ingest), search, evaluate (metrics cross-checked against ir_measures)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import flask
import pytest

from api.kb import kb_bp
from cli.corpus import corpus_group
from evaluation.metrics import evaluate_run, mrr_at_k, ndcg_at_k, recall_at_k
from kb.store import CorpusStore
from settings import Settings

FIX = Path(__file__).parent / "fixtures" / "kb"


def make_app(tmp_path, **env):
    app = flask.Flask(__name__)
    app.config["SETTINGS"] = Settings.from_env({"TASKFINDER_DATA_DIR": str(tmp_path), **env})
    app.register_blueprint(kb_bp)
    app.cli.add_command(corpus_group)
    return app


def invoke(app, *args):
    return app.test_cli_runner().invoke(args=["corpus", *args], catch_exceptions=False)


def test_ingest_beir_search_and_reingest(tmp_path):
    app = make_app(tmp_path)
    res = invoke(app, "ingest", "--name", "mini", "--beir", str(FIX / "mini_beir"))
    assert res.exit_code == 0, res.output
    stats = json.loads(res.output)
    assert stats["added"] == 12 and stats["analysed"] == 12
    base = tmp_path / "corpora" / "mini"
    assert (base / "queries" / "train.jsonl").exists() and (base / "qrels" / "train.tsv").exists()
    res = invoke(app, "search", "--name", "mini", "--q", "lung cancer smoking", "--k", "3")
    assert res.exit_code == 0 and res.output.splitlines()[0].split()[2] == "d11"
    # unchanged re-ingest analyses nothing
    stats = json.loads(invoke(app, "ingest", "--name", "mini", "--beir", str(FIX / "mini_beir")).output)
    assert stats["analysed"] == 0 and stats["unchanged"] == 12
    # one changed document, one new
    beir2 = tmp_path / "beir2"
    shutil.copytree(FIX / "mini_beir", beir2)
    lines = (beir2 / "corpus.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    row["text"] += " Reinfarction was rare."
    lines[0] = json.dumps(row)
    lines.append(json.dumps({"_id": "d13", "title": "New", "text": "Reinfarction risk after stenting."}))
    (beir2 / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    stats = json.loads(invoke(app, "ingest", "--name", "mini", "--beir", str(beir2)).output)
    assert (stats["analysed"], stats["changed"], stats["added"], stats["unchanged"]) == (2, 1, 1, 11)
    out = json.loads(invoke(app, "search", "--name", "mini", "--q", "reinfarction", "--json").output)
    assert {r["id"] for r in out["results"]} == {"d1", "d13"}


def test_plain_jsonl_upsert_and_replace(tmp_path):
    app = make_app(tmp_path)
    stats = json.loads(invoke(app, "ingest", "--name", "own", "--jsonl", str(FIX / "own_docs.jsonl")).output)
    assert stats["added"] == 3
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "t4", "text": "Book a meeting room"}) + "\n")
    stats = json.loads(invoke(app, "ingest", "--name", "own", "--jsonl", str(extra)).output)
    assert stats["documents"] == 4 and stats["analysed"] == 1
    stats = json.loads(invoke(app, "ingest", "--name", "own", "--jsonl", str(extra), "--replace").output)
    assert stats["documents"] == 1 and stats["removed"] == 3
    docs = CorpusStore(tmp_path).documents("own")
    assert [d.id for d in docs] == ["t4"]


def test_bad_rows_rejected_with_line_numbers_and_nothing_written(tmp_path):
    app = make_app(tmp_path)
    invoke(app, "ingest", "--name", "own", "--jsonl", str(FIX / "own_docs.jsonl"))
    before = (tmp_path / "corpora" / "own" / "documents.jsonl").read_bytes()
    res = app.test_cli_runner().invoke(args=["corpus", "ingest", "--name", "own", "--jsonl", str(FIX / "bad_docs.jsonl")])
    assert res.exit_code != 0
    for line in ("bad_docs.jsonl:2", "bad_docs.jsonl:3", "bad_docs.jsonl:4", "bad_docs.jsonl:5",
                 "bad_docs.jsonl:6", "bad_docs.jsonl:7"):
        assert line in res.output
    assert "bad_docs.jsonl:1:" not in res.output
    assert (tmp_path / "corpora" / "own" / "documents.jsonl").read_bytes() == before
    # and a brand-new corpus is not created at all
    res = app.test_cli_runner().invoke(args=["corpus", "ingest", "--name", "fresh", "--jsonl", str(FIX / "bad_docs.jsonl")])
    assert res.exit_code != 0 and not (tmp_path / "corpora" / "fresh").exists()


def test_evaluate_all_modes_json_and_llm_skips(tmp_path):
    app = make_app(tmp_path)
    invoke(app, "ingest", "--name", "mini", "--beir", str(FIX / "mini_beir"))
    out = tmp_path / "eval.json"
    res = invoke(app, "evaluate", "--name", "mini", "--queries", str(FIX / "mini_beir" / "queries.train.jsonl"),
                 "--qrels", str(FIX / "mini_beir" / "qrels" / "train.tsv"), "--mode", "all", "--json", str(out))
    assert res.exit_code == 0, res.output
    modes = json.loads(out.read_text())["modes"]
    assert set(modes) == {"bm25", "rm3", "qe", "enriched", "enriched_qe", "sage"}
    for m in ("bm25", "rm3"):
        assert set(modes[m]) >= {"ndcg@10", "recall@10", "recall@100", "mrr@10", "n"} and modes[m]["n"] == 5
        assert 0.5 < modes[m]["recall@100"] <= 1.0
    assert "LLM" in modes["qe"]["skipped"] and "enrich" in modes["enriched"]["skipped"]
    assert "skipped" in res.output
    # default queries/qrels: the corpus's only ingested split
    res = invoke(app, "evaluate", "--name", "mini")
    assert res.exit_code == 0 and "bm25" in res.output


def test_metrics_match_ir_measures():
    import ir_measures
    from ir_measures import RR, R, nDCG

    qrels = {"q1": {"a": 2, "b": 1, "c": 0, "z": 1}, "q2": {"x": 1}, "q3": {"m": 3, "n": 1}}
    run = {"q1": ["c", "b", "y", "a"] + [f"f{i}" for i in range(10)],
           "q2": [f"g{i}" for i in range(12)] + ["x"],
           "q3": ["n", "m"]}
    ours = evaluate_run(run, qrels)
    ir_run = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    ref = ir_measures.calc_aggregate([nDCG @ 10, R @ 10, R @ 100, RR @ 10], qrels, ir_run)
    assert ours["ndcg@10"] == pytest.approx(ref[nDCG @ 10], abs=1e-9)
    assert ours["recall@10"] == pytest.approx(ref[R @ 10], abs=1e-9)
    assert ours["recall@100"] == pytest.approx(ref[R @ 100], abs=1e-9)
    assert ours["mrr@10"] == pytest.approx(ref[RR @ 10], abs=1e-9)
    assert ndcg_at_k(["a"], {"a": 1}) == 1.0 and recall_at_k([], {"a": 1}, 10) == 0.0 and mrr_at_k(["b", "a"], {"a": 1}) == 0.5

"""GET /api/kb/search: results with per-term explanations; every bad parameter is a 400 JSON."""
from __future__ import annotations

from pathlib import Path

import flask
import pytest

from kb.api import kb_bp
from kb.cli import corpus_group
from kb.store import CorpusStore
from settings import Settings

FIX = Path(__file__).parent / "fixtures" / "kb"


@pytest.fixture()
def client(tmp_path):
    app = flask.Flask(__name__)
    app.config["SETTINGS"] = Settings.from_env({"TASKFINDER_DATA_DIR": str(tmp_path), "MAX_QUERY_CHARS": "50"})
    app.register_blueprint(kb_bp)
    app.cli.add_command(corpus_group)
    CorpusStore(tmp_path).ingest("mini", beir_dir=FIX / "mini_beir")
    with app.test_client() as c:
        c.application = app
        yield c


def test_search_returns_results_and_explanations(client):
    r = client.get("/api/kb/search", query_string={"corpus": "mini", "q": "statins cardiovascular events", "k": 2})
    assert r.status_code == 200
    body = r.get_json()
    assert [x["id"] for x in body["results"]] == ["d2", "d6"]
    top = body["results"][0]
    assert top["title"] == "Statins and cholesterol" and top["score"] > 0
    terms = {m["term"]: m for m in top["matched"]}
    assert set(terms) == {"statin", "cardiovascular", "event"}
    assert terms["statin"]["df"] == 1 and terms["statin"]["source"] == "query" and terms["statin"]["weight"] == 1
    assert sum(m["contribution"] for m in top["matched"]) == pytest.approx(top["score"], rel=1e-4)
    assert {q["term"] for q in body["query_terms"]} == {"statin", "cardiovascular", "event"}
    assert "kb" in client.application.extensions      # loaded index cached on the app
    r = client.get("/api/kb/search", query_string={"corpus": "mini", "q": "statins", "mode": "rm3"})
    assert r.status_code == 200 and r.get_json()["expansion"]["source"] == "rm3"


@pytest.mark.parametrize("params, fragment", [
    ({"q": "x"}, "corpus"),
    ({"corpus": "nope", "q": "x"}, "unknown corpus"),
    ({"corpus": "../etc", "q": "x"}, "unknown corpus"),
    ({"corpus": "mini"}, "'q'"),
    ({"corpus": "mini", "q": "   "}, "'q'"),
    ({"corpus": "mini", "q": "x" * 51}, "longer"),
    ({"corpus": "mini", "q": "x", "k": "ten"}, "'k'"),
    ({"corpus": "mini", "q": "x", "k": "0"}, "'k'"),
    ({"corpus": "mini", "q": "x", "k": "100000"}, "'k'"),
    ({"corpus": "mini", "q": "x", "mode": "magic"}, "unknown mode"),
    ({"corpus": "mini", "q": "x", "mode": "qe"}, "LLM"),
    ({"corpus": "mini", "q": "x", "mode": "enriched"}, "enrich"),
])
def test_bad_parameters_are_400_json(client, params, fragment):
    r = client.get("/api/kb/search", query_string=params)
    assert r.status_code == 400
    assert fragment in r.get_json()["error"]


def test_query_with_no_matching_terms_is_empty_not_error(client):
    r = client.get("/api/kb/search", query_string={"corpus": "mini", "q": "the of and 🙂"})
    assert r.status_code == 200 and r.get_json()["results"] == []

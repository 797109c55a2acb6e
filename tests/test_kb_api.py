"""GET /api/kb/search: results with per-term explanations; every bad parameter is a 400 JSON."""
from __future__ import annotations

from pathlib import Path

import flask
import pytest

from api.kb import kb_bp
from cli.corpus import corpus_group
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
    ({"corpus": "mini", "q": "x" * 51}, "characters long; the limit is 50"),
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


def test_searches_never_fail_while_the_index_is_being_saved(client, tmp_path):
    """Index.save publishes a complete new version in one step: a concurrent search always
    finds an index (before, the folder swap left a moment with none, and searches got 500)."""
    import threading

    store = CorpusStore(tmp_path)
    index = store.load_index("mini")
    statuses: list[int] = []
    stop = threading.Event()

    def reader():
        with client.application.test_client() as own:
            while not stop.is_set():
                r = own.get("/api/kb/search", query_string={"corpus": "mini", "q": "statins cardiovascular"})
                statuses.append(r.status_code)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(400):
            index.k1 = 0.9 + (i % 2) * 0.3  # alternate two versions, so each save is a new index
            index.save(store.index_path("mini"))
    finally:
        stop.set()
        thread.join(30)
    assert statuses and set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
    versions = [p.name for p in store.path("mini").iterdir() if p.name.startswith("index.v")]
    assert len(versions) <= 2  # the current version and the one it replaced

"""The search API over the demo catalog: the issue's acceptance queries, the response
contract, the role parameter (verified roles: tests/test_role_tokens.py) and every error path."""
import os

import pytest

from catalog.records import CaseRecord
from infra.metrics import Metrics
from serving.service import SearchService
from tests.conftest import build_app, make_settings


def search(client, **params):
    return client.get("/api/search", query_string=params)


def top_ids(body, n=5):
    return [r["id"] for r in body["results"][:n]]


def test_acceptance_queries(client):
    body = search(client, q="devlopmental screning").get_json()
    assert body["results"][0]["name"] in {"ASQ-3 Screening", "45-Day Screening Tracker"}
    assert "ersea.application-pool" in top_ids(search(client, q="eligibility").get_json(), 3)
    cacfp = top_ids(search(client, q="CACFP").get_json(), 2)
    assert set(cacfp) == {"nutrition.cacfp-meal-count", "nutrition.cacfp-eligibility"}


def test_typo_tolerance_without_any_test_case_for_the_typo(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    """Drop every case whose query is misspelled: the typo signal alone must still get there."""
    cases = [c for c in demo_cases if c.category != "typo"]
    client = build_app(make_settings(tmp_path, shared_cache_dir), demo_tasks, cases).test_client()
    body = search(client, q="devlopmental screning", k=3).get_json()
    assert {"health.asq3-screening", "health.screening-tracker"} & set(top_ids(body, 2))
    assert body["corrections"]["devlopmental"][0]["word"] == "developmental"
    assert search(client, q="imunization recrods").get_json()["results"][0]["id"] == "health.immunizations"


def test_response_contract(client):
    body = search(client, q="hearing and vision screening", k=4).get_json()
    assert set(body) >= {"query", "k", "role", "roles", "access", "results", "no_confident_match", "degraded",
                         "corrections", "weights", "ranker", "rerank", "timings_ms"}
    assert len(body["results"]) == 4 and body["degraded"] == []
    assert body["ranker"]["mode"] == "full" and body["ranker"]["source"] in ("default", "fit")
    first = body["results"][0]
    assert set(first) >= {"id", "name", "help", "url", "score", "probability", "signals", "contributions", "matched"}
    assert set(first["signals"]) == {"lexical", "rationale", "typo", "exemplar", "embedding", "centroid", "neighbour",
                                     "prototype"}
    assert sum(first["contributions"].values()) == pytest.approx(first["score"], abs=1e-2)
    assert first["matched"] and all({"term", "field"} <= set(m) for m in first["matched"])
    assert set(body["timings_ms"]) >= {"embedding", "prefilter", "rerank", "total"}
    scores = [r["score"] for r in body["results"] if not r["pinned"]]
    assert scores == sorted(scores, reverse=True)
    assert body["rerank"] == {"requested": False, "applied": False, "skipped": "not_requested"}


def test_the_role_parameter_alone_grants_nothing(client):
    """Restricted tasks need a verified role (tests/test_role_tokens.py); `?role=` is ignored."""
    anonymous = search(client, q="CACFP monthly claim", k=10).get_json()
    assert "nutrition.cacfp-claim" not in top_ids(anonymous, 10)
    assert anonymous["access"] == {"credential": "none"} and anonymous["roles"] == []
    claimed = search(client, q="CACFP monthly claim", role="fiscal", k=10)
    assert claimed.status_code == 200
    body = claimed.get_json()
    assert "nutrition.cacfp-claim" not in top_ids(body, 10)
    assert body["role"] is None and body["roles"] == [] and "ignored" in body["access"]["note"]


def test_an_unknown_role_is_not_an_error_and_no_error_lists_roles(client):
    assert search(client, q="CACFP", role="janitor").status_code == 200
    error = search(client, q="", role="janitor").get_json()["error"]
    assert "fiscal" not in error and "role" not in error


@pytest.mark.parametrize("params, message", [
    ({}, "required"),
    ({"q": ""}, "required"),
    ({"q": "   \t "}, "required"),
    ({"q": "\u200b\u0000"}, "required"),
    ({"q": "x" * 257}, "limit is 256"),
    ({"q": "ok", "k": "ten"}, "k must be an integer"),
    ({"q": "ok", "k": "0"}, "between 1 and 50"),
    ({"q": "ok", "k": "51"}, "between 1 and 50"),
    ({"q": "ok", "rerank": "maybe"}, "rerank must be 0 or 1"),
])
def test_bad_requests_get_400_with_a_message(client, params, message):
    response = search(client, **params)
    assert response.status_code == 400
    assert message in response.get_json()["error"]


@pytest.mark.parametrize("query", ["🚌🚌🚌", "ＡＳＱ－３", "Évaluation DRDP", "'; DROP TABLE tasks; --",
                                   "<script>alert(1)</script>", "\u202eenilesab", "a" * 256, "زيارة منزلية"])
def test_any_unicode_input_is_normalised_never_a_500(client, query):
    response = search(client, q=query)
    assert response.status_code in (200, 400)
    assert response.is_json


@pytest.mark.parametrize("raw", ["%ff%fe", "%ed%a0%bd", "%00%00", "%c0%af"])
def test_invalid_utf8_bytes_are_replaced_not_a_500(client, raw):
    response = client.get(f"/api/search?q=lead{raw}screening")
    assert response.status_code == 200
    assert response.get_json()["results"]


def test_fullwidth_acronym_is_normalised(client):
    assert search(client, q="ＡＳＱ－３").get_json()["results"][0]["id"] == "health.asq3-screening"


def test_health_readiness_metrics_and_spec(client):
    assert client.get("/healthz").get_json() == {"status": "ok", "pid": os.getpid()}
    ready = client.get("/readyz").get_json()
    assert ready["status"] == "ready" and ready["tasks"] == 200 and ready["embeddings"] == "ok"
    assert ready["pid"] == os.getpid()
    search(client, q="lead screening")
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'taskfinder_http_requests_total{endpoint="/api/search",status="200"}' in metrics
    assert 'taskfinder_http_request_duration_seconds_count{endpoint="/healthz",status="200"}' in metrics
    assert "taskfinder_stage_seconds_bucket" in metrics
    spec = client.get("/openapi.json").get_json()
    assert "/api/search" in spec["paths"]
    assert client.get("/nope").status_code == 404 and client.post("/api/search").status_code == 405


def test_readiness_fails_on_an_empty_catalog(tmp_path, shared_cache_dir):
    client = build_app(make_settings(tmp_path, shared_cache_dir), [], []).test_client()
    assert client.get("/readyz").status_code == 503
    assert client.get("/healthz").status_code == 200


def test_index_follows_catalog_edits_without_restart(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    from catalog.records import CaseRecord

    app = build_app(make_settings(tmp_path, shared_cache_dir), demo_tasks, demo_cases)
    client, store = app.test_client(), app.extensions["taskfinder"].store
    before = search(client, q="kiddie cab").get_json()["results"]
    assert not before or before[0]["id"] != "transport.bus-routes"
    store.add_case(CaseRecord(query="kiddie cab", gold=("transport.bus-routes",), rationale="Slang for the school bus route."))
    assert search(client, q="kiddie cab").status_code == 200  # served (old index) while the new one builds
    app.extensions["taskfinder"].search.live(wait=True)
    body = search(client, q="kiddie cab").get_json()
    assert body["results"][0]["id"] == "transport.bus-routes" and body["results"][0]["pinned"]


def test_cli_search_prints_the_same_ranking(demo_app):
    runner = demo_app.test_cli_runner()
    result = runner.invoke(args=["search", "CACFP", "--json", "-k", "3"])
    assert result.exit_code == 0, result.output
    import json
    body = json.loads(result.output)
    api = demo_app.test_client().get("/api/search", query_string={"q": "CACFP", "k": 3}).get_json()
    assert [r["id"] for r in body["results"]] == [r["id"] for r in api["results"]]
    text = runner.invoke(args=["search", "CACFP", "-k", "3"]).output
    assert text.splitlines()[1].startswith(f" 1. {api['results'][0]['name']}  [{api['results'][0]['id']}]")
    assert api["results"][0]["id"].startswith("nutrition.cacfp")
    bad = runner.invoke(args=["search", "   "])
    assert bad.exit_code != 0 and "required" in bad.output


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_fitted_abstention_refuses_out_of_scope_queries_but_never_a_pinned_one(tmp_path, shared_cache_dir,
                                                                                 demo_tasks, demo_cases):
    """A real per-catalog fit on the demo's cases plus some more out-of-scope ones produces an
    abstention model that learnt from them (beside the generic off-topic memory); an off-topic query
    then gets no answer rather than a wrong task, a test case's own query always answers, and
    ABSTAIN=0 switches the refusal off."""
    off_topic_cases = [CaseRecord(query=q, gold=()) for q in (
        "what time does the mall open", "play some jazz music", "how tall is mount everest", "order a pizza",
        "what is the capital of peru", "set an alarm for 6 am", "translate hello into french", "tell me a joke",
        "who won the world series", "recipe for chocolate cake", "how do i change a flat tire",
        "what is the stock price of apple", "find a cheap hotel in rome", "how many ounces in a pound")]
    cases = [*demo_cases, *off_topic_cases]
    app = build_app(make_settings(tmp_path / "fit", shared_cache_dir), demo_tasks, cases)
    service = app.extensions["taskfinder"].search
    report = service.refit()
    n_oos = sum(1 for c in cases if not c.gold)
    assert report["status"] == "fitted" and report["abstention"]["full"]["n_negatives"]["case"] == n_oos
    service.live(wait=True)   # the new fit moved the revision: wait for the rebuild it triggers
    client = app.test_client()
    first = search(client, q="ASQ-3 Screening").get_json()
    assert first["ranker"]["source"] == "fit" and first["ranker"]["fit_id"] == report["fit_id"]
    off_topic = [search(client, q=q).get_json() for q in (
        "what is the weather in paris tomorrow", "book me a flight to denver", "how do i bake sourdough bread")]
    assert sum(body["no_confident_match"] for body in off_topic) >= 2
    assert all(body["results"] == [] for body in off_topic if body["no_confident_match"])
    registry = app.extensions["taskfinder"].metrics.registry
    assert registry.get_sample_value("taskfinder_no_confident_match_searches_total") == \
        sum(body["no_confident_match"] for body in off_topic)
    assert registry.get_sample_value("taskfinder_ranker_fit_id") == report["fit_id"]
    pinned = search(client, q="eligibility").get_json()  # a test case's exact query always answers
    assert pinned["no_confident_match"] is False and pinned["results"][0]["pinned"]
    lenient = SearchService(service.settings.with_overrides(abstain=False), service.source, service.embedder, None,
                            Metrics())
    assert lenient.search("book me a flight to denver")["results"]


def test_a_query_without_any_evidence_is_not_answered(client):
    assert search(client, q="lead screening results").get_json()["no_confident_match"] is False
    body = search(client, q="🚌🚌🚌").get_json()
    assert body["results"] == [] and body["no_confident_match"] is True


def test_responses_match_the_openapi_spec(client):
    """The published contract is checked against real responses, not just written down."""
    import json

    from jsonschema import Draft202012Validator

    from settings import PROJECT_ROOT

    spec = json.loads((PROJECT_ROOT / "openapi.json").read_text())

    def validator(name):
        return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": spec["components"]})

    for params in ({"q": "hearing and vision screening"}, {"q": "devlopmental screning", "k": 3}, {"q": "🚌"}):
        validator("SearchResponse").validate(search(client, **params).get_json())
    validator("Error").validate(search(client, q="").get_json())
    validator("Readiness").validate(client.get("/readyz").get_json())


def test_an_unhandled_error_is_a_json_500_and_is_counted(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir), demo_tasks, demo_cases)
    client, service = app.test_client(), app.extensions["taskfinder"].search

    def broken_search(*args, **kwargs):
        raise RuntimeError("connection to server at 10.0.0.7 failed: password authentication")

    service.answer = broken_search
    response = search(client, q="ASQ")
    assert response.status_code == 500 and response.is_json
    assert response.get_json() == {"error": "internal server error"}
    assert b"10.0.0.7" not in response.data and b"Traceback" not in response.data
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'taskfinder_http_requests_total{endpoint="/api/search",status="500"} 1.0' in metrics
    assert 'taskfinder_http_request_duration_seconds_count{endpoint="/api/search",status="500"} 1.0' in metrics

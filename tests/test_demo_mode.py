"""The demo as a new user meets it (issue 19): the role switcher and the hidden-by-role count,
the stand-in task pages and the HTML page-not-found, whether re-ranking is available, the
category labels, and the compressed widget script. (In a browser: tests/browser/test_demo_pages.py.)"""
from __future__ import annotations

import gzip

import brotli
import pytest

from lexicon.text import display_label
from api.roles import sign_role_token
from tests.conftest import build_app, close_app, make_settings

SECRET = "s" * 40


@pytest.fixture(scope="module")
def switcher_app(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path_factory.mktemp("switcher"), shared_cache_dir, DEMO_ROLE_SWITCHER="1",
                                  EMBEDDINGS_ENABLED="0"), demo_tasks, demo_cases)
    yield app
    close_app(app)


def names(response) -> list[str]:
    return [row["name"] for row in response.get_json()["results"]]


# -- 1. the role switcher and the hidden-by-role count ---------------------------------------------
def test_anonymous_search_says_how_many_results_its_roles_hide_and_never_which(switcher_app):
    client = switcher_app.test_client()
    body = client.get("/api/search?q=bus driver background check&k=5").get_json()
    assert "Background Checks" not in names_of(body) and "Driver Qualifications" not in names_of(body)
    assert body["hidden_by_role"] >= 1
    text = str(body)
    assert "Background Checks" not in text and "hr.background-checks" not in text


def names_of(body: dict) -> list[str]:
    return [row["name"] for row in body["results"]]


def test_the_switcher_mints_a_short_lived_token_that_shows_the_roles_tasks(switcher_app):
    client = switcher_app.test_client()
    assert 'id="demo-role"' in client.get("/").get_data(as_text=True)
    minted = client.get("/demo/role-token?role=hr")
    assert minted.status_code == 200 and minted.headers["Cache-Control"] == "no-store"
    token = minted.get_json()["token"]
    assert 0 < minted.get_json()["expires_in"] <= 300
    body = client.get("/api/search?q=bus driver background check&k=5",
                      headers={"Authorization": f"Bearer {token}"}).get_json()
    assert body["access"]["credential"] == "verified" and body["roles"] == ["hr"]
    assert {"Background Checks", "Driver Qualifications"} <= set(names_of(body))
    assert body["hidden_by_role"] == 0
    assert client.get("/demo/role-token?role=nobody").status_code == 400


def test_the_switcher_is_off_by_default_and_its_tokens_are_worth_nothing_elsewhere(switcher_app, demo_app):
    token = switcher_app.test_client().get("/demo/role-token?role=hr").get_json()["token"]
    client = demo_app.test_client()   # DEMO_HOMEPAGE on (the default), DEMO_ROLE_SWITCHER not set
    assert client.get("/demo/role-token?role=hr").status_code == 404
    assert 'id="demo-role"' not in client.get("/").get_data(as_text=True)
    body = client.get("/api/search?q=background check", headers={"Authorization": f"Bearer {token}"}).get_json()
    assert body["access"]["credential"] == "rejected" and "Background Checks" not in names_of(body)


def test_with_a_production_secret_the_switcher_never_signs_with_it(tmp_path, shared_cache_dir, demo_tasks):
    app = build_app(make_settings(tmp_path, shared_cache_dir, DEMO_ROLE_SWITCHER="1", EMBEDDINGS_ENABLED="0",
                                  ROLE_TOKEN_SECRET=SECRET), demo_tasks, [])
    try:
        client = app.test_client()
        demo_token = client.get("/demo/role-token?role=hr").get_json()["token"]
        host_token = sign_role_token(SECRET, ["hr"], 60)
        assert demo_token.split(".")[1] != sign_role_token(SECRET, ["hr"], 60).split(".")[1]
        for token in (demo_token, host_token):   # the host's tokens keep working beside the demo's
            body = client.get("/api/search?q=background check", headers={"Authorization": f"Bearer {token}"}).get_json()
            assert body["access"]["credential"] == "verified"
        forged = sign_role_token("x" * 40, ["hr"], 60)
        assert client.get("/api/search?q=background check",
                          headers={"Authorization": f"Bearer {forged}"}).get_json()["access"]["credential"] == "rejected"
    finally:
        close_app(app)


def test_demo_homepage_off_turns_the_switcher_off(tmp_path, shared_cache_dir):
    app = build_app(make_settings(tmp_path, shared_cache_dir, DEMO_HOMEPAGE="0", DEMO_ROLE_SWITCHER="1",
                                  EMBEDDINGS_ENABLED="0"), [], [])
    try:
        assert app.test_client().get("/demo/role-token?role=hr").status_code == 404
    finally:
        close_app(app)


# -- 4. task URLs land on a page; unknown pages are HTML, unknown API paths JSON ---------------------
def test_a_demo_task_url_opens_a_stand_in_page(switcher_app):
    client = switcher_app.test_client()
    page = client.get("/nutrition/cacfp-meal-count")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert "CACFP Meal Count" in text and "Point-of-service counts" in text
    assert "unsafe-inline" not in page.headers["Content-Security-Policy"]
    restricted = client.get("/hr/background-checks").get_data(as_text=True)
    assert "Background Checks" not in restricted   # a restricted task's name is not shown to anyone


def test_unknown_pages_are_html_and_api_paths_keep_json(client):
    page = client.get("/no/such/page", headers={"Accept": "text/html,*/*;q=0.8"})
    assert page.status_code == 404 and page.mimetype == "text/html"
    assert "Page not found" in page.get_data(as_text=True)
    for path in ("/api/nope", "/admin/api/nope", "/api"):
        api = client.get(path, headers={"Accept": "text/html,*/*;q=0.8"})
        assert api.status_code == 404 and api.mimetype == "application/json", path
    assert client.get("/no/such/page", headers={"Accept": "application/json"}).mimetype == "application/json"


# -- 10. re-ranking availability, category labels, compression ------------------------------------
def test_the_api_says_re_ranking_is_unavailable_without_an_llm(client):
    body = client.get("/api/search?q=immunization").get_json()
    assert body["rerank_available"] is False


def test_the_api_says_re_ranking_is_available_with_an_llm(tmp_path, shared_cache_dir, demo_tasks):
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0",
                                  LLM_BASE_URL="http://127.0.0.1:9/v1"), demo_tasks[:5], [])
    try:
        assert app.test_client().get("/api/search?q=policy").get_json()["rerank_available"] is True
    finally:
        close_app(app)


def test_acronym_categories_keep_their_capitals(client):
    rows = client.get("/api/search?q=eligibility determination&k=10").get_json()["results"]
    labels = {row["category"]: row["category_label"] for row in rows}
    assert labels.get("ersea") == "ERSEA"
    rows = client.get("/api/search?q=staff training hours&k=10").get_json()["results"]
    assert {"human_resources": "Human Resources"}.items() <= {r["category"]: r["category_label"] for r in rows}.items()


def test_display_label():
    assert display_label("ersea", ["ERSEA Selection Criteria", "ERSEA report", "ersea"]) == "ERSEA"
    assert display_label("facilities_safety", ["Facilities"]) == "Facilities Safety"
    assert display_label("it", ["it works"]) == "It"
    assert display_label("hr", ["HR files", "hr"]) == "Hr"   # half is not most
    assert display_label("hr", []) == "HR" and display_label("data_manager", []) == "Data Manager"
    assert display_label("Fiscal_Year", []) == "Fiscal Year"   # written with capitals: kept


@pytest.mark.parametrize("encoding, decompress", [("gzip", gzip.decompress), ("br", brotli.decompress)])
def test_widget_js_is_served_compressed_when_accepted(client, encoding, decompress):
    plain = client.get("/widget.js", headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in plain.headers
    packed = client.get("/widget.js", headers={"Accept-Encoding": encoding})
    assert packed.headers["Content-Encoding"] == encoding and "Accept-Encoding" in packed.headers["Vary"]
    assert decompress(packed.data) == plain.data and len(packed.data) < len(plain.data) / 3
    assert "max-age=300" in packed.headers["Cache-Control"] and packed.headers["ETag"] != plain.headers["ETag"]
    again = client.get("/widget.js", headers={"Accept-Encoding": encoding, "If-None-Match": packed.headers["ETag"]})
    assert again.status_code == 304


# -- 7. the demo ships with its fit ----------------------------------------------------------------
def test_load_demo_fits_the_ranker_so_the_first_answers_are_the_final_ones(tmp_path, shared_cache_dir):
    from app import create_app

    settings = make_settings(tmp_path, shared_cache_dir, AUTO_FIT="1", EMBEDDINGS_ENABLED="0")
    loader = create_app(settings)
    try:
        result = loader.test_cli_runner().invoke(args=["load-demo"])
        assert result.exit_code == 0 and "ranker fit: fitted" in result.output, result.output
    finally:
        close_app(loader)
    server = create_app(settings)   # `python app.py serve` afterwards: a fresh process on that database
    try:
        live = server.extensions["taskfinder"].search.live(wait=True)
        assert not live.fit_stale   # no background fit is due: nothing will change the ranking later
        body = server.test_client().get("/api/search?q=bus driver background check").get_json()
        assert body["ranker"]["source"] == "fit" and body["ranker"]["fit_id"] is not None
    finally:
        close_app(server)

"""Issue 17 items 5 and 7 on the admin, on SQLite and PostgreSQL: no admin input reaches a 500.
Integers past 64 bits in routes and parameters, deeply nested JSON bodies, lone surrogates and
NUL characters are 4xx with a message; task ids with '/' and javascript: URLs are refused in the
editor as at import."""
from __future__ import annotations

import pytest

from tests.conftest import signed_in

HUGE = str(2**64 + 7)
NESTED = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def api(admin_app):
    _, token = admin_app.extensions["taskfinder"].accounts.create_token("eddie", actor="cli:test")
    return admin_app.test_client(), {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("method, path", [
    ("get", f"/admin/cases/{HUGE}"), ("get", f"/admin/cases/{HUGE}/edit"), ("get", f"/admin/versions/{HUGE}"),
    ("get", f"/admin/evaluation/{HUGE}"), ("get", f"/admin/api/versions/{HUGE}"),
    ("get", f"/admin/api/evaluation/runs/{HUGE}"), ("post", f"/admin/api/versions/{HUGE}/rollback"),
    ("put", f"/admin/api/cases/{HUGE}"), ("delete", f"/admin/api/cases/{HUGE}?version=1"),
    ("get", f"/admin/api/versions?offset={HUGE}"), ("get", "/admin/api/versions?offset=" + "9" * 5000),
    ("get", "/admin/api/versions?limit=%C2%B2"), ("delete", f"/admin/api/cases/1?version={HUGE}"),
])
def test_an_integer_past_64_bits_is_a_4xx(api, method, path):
    client, editor = api
    response = getattr(client, method)(path, headers=editor, json={"version": 1})
    assert 400 <= response.status_code < 500, (path, response.status_code)


@pytest.mark.parametrize("path", ["/admin/tasks?page=%C2%B2", "/admin/cases?page=" + HUGE,
                                  "/admin/analytics/?days=%C2%B2", "/admin/versions?page=%C2%B2"])
def test_odd_page_numbers_fall_back_to_the_first_page(admin_app, path):
    client, _ = signed_in(admin_app, "vera")
    assert client.get(path).status_code == 200


@pytest.mark.parametrize("method, path", [("post", "/admin/api/cases"), ("post", "/admin/api/tasks"),
                                          ("put", "/admin/api/cases/1"), ("post", "/admin/api/versions/1/rollback"),
                                          ("post", "/admin/api/tasks/x/retire")])
def test_a_deeply_nested_json_body_is_a_400(api, method, path):
    client, editor = api
    response = getattr(client, method)(path, headers={**editor, "Content-Type": "application/json"}, data=NESTED)
    assert response.status_code == 400 and response.get_json()["error"]


@pytest.mark.parametrize("body, field", [
    ({"query": "lead\x00screening", "gold": []}, "query"),
    ({"query": "lead \ud800 screening", "gold": []}, "query"),
    ({"query": "fine", "gold": [], "message": "note\x00"}, "message"),
    ({"query": "fine", "gold": [], "rationale": "bad \udc00"}, "rationale"),
    ({"query": "fine", "gold": [], "version": int(HUGE)}, "version"),
])
def test_bad_text_or_numbers_in_a_case_are_a_400_naming_the_field(api, body, field):
    client, editor = api
    method, path = (client.put, "/admin/api/cases/1") if "version" in body else (client.post, "/admin/api/cases")
    import json
    response = method(path, headers={**editor, "Content-Type": "application/json"}, data=json.dumps(body))
    assert response.status_code == 400, response.get_data(as_text=True)
    assert f"'{field}'" in str(response.get_json())


def test_nul_in_a_form_field_is_a_400_not_a_database_error(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    response = client.post("/admin/cases/preview", data={"csrf_token": csrf, "action": "save", "query": "lead\x00",
                                                         "message": "", "base_version": ""})
    assert response.status_code == 400 and "control character" in response.get_data(as_text=True)


@pytest.mark.parametrize("row, message", [
    ({"id": "finance/claims", "name": "Claims", "help": ""}, "must not contain '/'"),
    ({"id": "t.js", "name": "JS", "help": "", "url": "javascript:alert(document.cookie)"}, "scheme 'javascript:'"),
    ({"id": "t.data", "name": "Data", "help": "", "url": "data:text/html;base64,PHNjcmlwdD4="}, "scheme 'data:'"),
])
def test_the_editor_refuses_slash_ids_and_non_http_urls(api, row, message):
    client, editor = api
    response = client.post("/admin/api/tasks", headers=editor, json=row)
    assert response.status_code == 400
    assert any(message in e for e in response.get_json()["errors"]), response.get_json()

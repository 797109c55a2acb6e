"""Issue 33 items 5, 6, 7 and 10, "the last 500s", on SQLite and PostgreSQL (the admin_app
fixture runs each test on both):

5. ids in routes past the 32-bit columns (2**31 up to 18 digits: PostgreSQL's `integer out of
   range`) and NUL in a task id in the path answer 404, not 500;
6. a lone surrogate as a JSON object key (POST /api/events, the admin JSON API, file imports) is
   a 400 naming the problem, not a 500 on encoding the error message that echoed the key;
7. `based_on=²` in a rollback confirmation is a 400, not `int('²')`'s ValueError;
10. task ids "." and ".." are refused (publishing redirected to /admin/tasks/..).

Each refused request also leaves the catalog as it was: nothing is lost, nothing half-written.
"""
from __future__ import annotations

import io
import json

import pytest

from catalog.formats import ImportRejected, load_tasks_bytes
from catalog.validation import task_id_problem
from tests.conftest import signed_in

MAX_ID = 2**31 - 1   # the id and version columns are 32-bit INTEGERs on PostgreSQL
PAST_32_BITS = ["2147483648", "9" * 18]
SURROGATE_KEY = '"\\ud800"'   # a JSON object key, as a client sends it (escaped)


@pytest.fixture(scope="module")
def api(admin_app):
    _, token = admin_app.extensions["taskfinder"].accounts.create_token("eddie", actor="cli:test")
    return admin_app.test_client(), {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def editor(admin_app):
    """A browser session of the editor `eddie`, and its CSRF token."""
    return signed_in(admin_app, "eddie")


def catalog_state(app) -> tuple[int, int, int]:
    """(versions, tasks, cases): what a refused request must leave unchanged."""
    store = app.extensions["taskfinder"].store
    return store.version_count(), len(store.tasks(include_inactive=True)), len(store.cases())


# -- item 5: ids past the 32-bit columns, NUL in a task id -------------------------------------------
@pytest.mark.parametrize("number", PAST_32_BITS)
@pytest.mark.parametrize("path", ["/admin/cases/{n}", "/admin/cases/{n}/edit", "/admin/versions/{n}",
                                  "/admin/versions/{n}/rollback", "/admin/evaluation/{n}"])
def test_an_id_past_32_bits_in_a_page_address_is_a_404(admin_app, editor, path, number):
    client, _ = editor
    response = client.get(path.format(n=number))
    assert response.status_code == 404, response.get_data(as_text=True)[:300]


@pytest.mark.parametrize("number", PAST_32_BITS)
def test_a_rollback_confirmation_past_32_bits_is_a_404(admin_app, editor, number):
    client, csrf = editor
    before = catalog_state(admin_app)
    response = client.post(f"/admin/versions/{number}/rollback", data={"csrf_token": csrf, "confirm": "1",
                                                                       "based_on": "1"})
    assert response.status_code == 404
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("number", PAST_32_BITS)
@pytest.mark.parametrize("method, path", [
    ("get", "/admin/api/versions/{n}"), ("get", "/admin/api/evaluation/runs/{n}"),
    ("post", "/admin/api/versions/{n}/rollback"), ("put", "/admin/api/cases/{n}"),
    ("delete", "/admin/api/cases/{n}?version=1"),
])
def test_an_id_past_32_bits_in_an_api_address_is_a_404(admin_app, api, method, path, number):
    client, token = api
    before = catalog_state(admin_app)
    response = getattr(client, method)(path.format(n=number), headers=token,
                                       json={"query": "lead screening", "gold": [], "version": 1})
    assert response.status_code == 404, response.get_data(as_text=True)[:300]
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("number, matches", [("0", True), ("7", True), ("999999999", True), ("2147483639", True),
                                             (str(MAX_ID), True), ("2147483648", False), ("2147483650", False),
                                             ("3000000000", False), ("9" * 18, False), ("-1", False)])
def test_the_route_id_pattern_is_exactly_the_32_bit_range(number, matches):
    import re

    from web.flask_app import Int32Converter
    assert bool(re.fullmatch(Int32Converter.regex, number)) is matches


def test_the_largest_32_bit_id_still_reaches_the_view(api):
    """The bound is the columns' own: 2**31 - 1 is a valid id (of nothing yet), not a refused one."""
    client, token = api
    response = client.get(f"/admin/api/versions/{MAX_ID}", headers=token)
    assert response.status_code == 404 and response.get_json()["error"] == f"version {MAX_ID} not found"


@pytest.mark.parametrize("number", PAST_32_BITS)
@pytest.mark.parametrize("method, path, body", [
    ("put", "/admin/api/cases/1", {"query": "lead screening", "gold": [], "version": "{n}"}),
    ("delete", "/admin/api/cases/1?version={n}", None),
    ("post", "/admin/api/tasks/zz.xss/retire", {"version": "{n}"}),
])
def test_a_version_past_32_bits_in_a_body_or_parameter_is_a_400(admin_app, api, method, path, body, number):
    client, token = api
    before = catalog_state(admin_app)
    body = None if body is None else {k: int(number) if v == "{n}" else v for k, v in body.items()}
    response = getattr(client, method)(path.format(n=number), headers=token, json=body)
    assert response.status_code == 400, response.get_data(as_text=True)[:300]
    assert "version" in json.dumps(response.get_json())
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("number", PAST_32_BITS)
def test_a_form_base_version_past_32_bits_is_refused_naming_the_field(admin_app, editor, number):
    client, csrf = editor
    before = catalog_state(admin_app)
    response = client.post("/admin/cases/publish", data={"csrf_token": csrf, "action": "save", "case_id": "1",
                                                         "query": "lead screening", "message": "",
                                                         "base_version": number})
    assert response.status_code == 422
    assert "base_version" in response.get_data(as_text=True)
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("method, path", [
    ("get", "/admin/tasks/%00"), ("get", "/admin/tasks/x%00/edit"),
    ("post", "/admin/tasks/x%00/learned/block"), ("post", "/admin/tasks/x%00/learned/unblock"),
])
def test_nul_in_a_task_id_in_a_page_address_is_a_404(admin_app, editor, method, path):
    client, csrf = editor
    before = catalog_state(admin_app)
    response = getattr(client, method)(path, data={"csrf_token": csrf, "query": "lead"})
    assert response.status_code == 404, response.get_data(as_text=True)[:300]
    assert "control character" in response.get_data(as_text=True)
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("method, path", [
    ("put", "/admin/api/tasks/x%00"), ("post", "/admin/api/tasks/x%00/retire"),
    ("get", "/admin/api/tasks/x%00/learned"), ("post", "/admin/api/tasks/x%00/learned/block"),
])
def test_nul_in_a_task_id_in_an_api_address_is_a_404(admin_app, api, method, path):
    client, token = api
    before = catalog_state(admin_app)
    response = getattr(client, method)(path, headers=token, json={"name": "x", "help": "", "version": 1,
                                                                   "query": "lead"})
    assert response.status_code == 404, response.get_data(as_text=True)[:300]
    assert "control character" in response.get_json()["error"]
    assert catalog_state(admin_app) == before


# -- item 6: a lone surrogate as a JSON object key ---------------------------------------------------
def event_body(extra_key: str, where: str) -> str:
    """An events batch (JSON text) with `extra_key` added to its one event or to the envelope."""
    event = f'"type": "click", "search_id": "{"A" * 22}", "task_id": "t", "position": 1'
    if where == "event":
        return f'{{"session_id": "sess-0123456789", "events": [{{{event}, {extra_key}: 1}}]}}'
    return f'{{"session_id": "sess-0123456789", "events": [{{{event}}}], {extra_key}: 1}}'


@pytest.mark.parametrize("where", ["event", "envelope"])
def test_a_lone_surrogate_key_in_events_is_a_400(admin_app, where):
    response = admin_app.test_client().post("/api/events", data=event_body(SURROGATE_KEY, where),
                                            content_type="application/json")
    assert response.status_code == 400, response.get_data(as_text=True)[:300]
    message = response.get_json()["error"]
    assert "lone surrogate" in message and "U+D800" in message


@pytest.mark.parametrize("method, path, body", [
    ("post", "/admin/api/cases", '{"query": "lead", "gold": [], %s: 1}'),
    ("put", "/admin/api/cases/1", '{"query": "lead", "gold": [], "version": 1, %s: 1}'),
    ("post", "/admin/api/tasks", '{"id": "t.new", "name": "New", "help": "", %s: 1}'),
    ("put", "/admin/api/tasks/zz.xss", '{"name": "New", "help": "", "version": 1, %s: 1}'),
    ("post", "/admin/api/tasks/zz.xss/learned/block", '{"query": "lead", %s: 1}'),
    ("post", "/admin/api/cases", '{"query": "lead", "gold": [], "nested": [{%s: 1}]}'),
    ("post", "/admin/api/cases", '{"query": "lead", "gold": [], "x": {"\\u0000": 1}}'),
])
def test_a_lone_surrogate_key_in_an_admin_json_body_is_a_400(admin_app, api, method, path, body):
    client, token = api
    before = catalog_state(admin_app)
    response = getattr(client, method)(path, headers={**token, "Content-Type": "application/json"},
                                       data=body.replace("%s", SURROGATE_KEY))
    assert response.status_code == 400, response.get_data(as_text=True)[:300]
    message = response.get_json()["error"]
    assert "lone surrogate" in message or "control character" in message
    assert catalog_state(admin_app) == before


def test_a_lone_surrogate_value_is_still_named_by_its_field(api):
    client, token = api
    response = client.post("/admin/api/cases", headers={**token, "Content-Type": "application/json"},
                           data='{"query": "lead \\udfff", "gold": []}')
    assert response.status_code == 400
    assert "field 'query'" in response.get_json()["error"] and "lone surrogate" in response.get_json()["error"]


def test_a_lone_surrogate_key_in_an_uploaded_file_is_refused_naming_the_line(admin_app, editor):
    client, csrf = editor
    before = catalog_state(admin_app)
    data = ('{"id": "t.one", "name": "One", "help": ""}\n'
            '{"id": "t.two", "name": "Two", "help": "", %s: 1}\n' % SURROGATE_KEY).encode()
    response = client.post("/admin/import", data={"csrf_token": csrf, "kind": "tasks",
                                                  "file": (io.BytesIO(data), "tasks.jsonl")},
                           content_type="multipart/form-data")
    assert response.status_code == 422, response.get_data(as_text=True)[:300]
    page = response.get_data(as_text=True)
    assert "line 2" in page and "lone surrogate" in page
    assert catalog_state(admin_app) == before


def test_a_lone_surrogate_key_in_a_file_is_an_import_error():
    with pytest.raises(ImportRejected) as refused:
        load_tasks_bytes(b'{"id": "t.one", "name": "One", "help": "", "\\udc00x": 1}\n', "tasks.jsonl")
    [error] = refused.value.errors
    assert error.startswith("line 1: ") and "lone surrogate" in error and "U+DC00" in error
    error.encode("utf-8")   # the message itself is printable text


# -- item 7: a rollback confirmation's based_on ------------------------------------------------------
@pytest.mark.parametrize("based_on", ["²", "１", "-1", "", "2147483648", "9" * 40])
def test_an_odd_based_on_in_a_rollback_confirmation_is_a_400(admin_app, editor, based_on):
    client, csrf = editor
    before = catalog_state(admin_app)
    response = client.post("/admin/versions/1/rollback", data={"csrf_token": csrf, "confirm": "1",
                                                               "based_on": based_on})
    assert response.status_code == 400, response.get_data(as_text=True)[:300]
    assert "review it again" in response.get_data(as_text=True)
    assert catalog_state(admin_app) == before


# -- item 10: task ids "." and ".." -----------------------------------------------------------------
@pytest.mark.parametrize("task_id", [".", ".."])
def test_dot_task_ids_are_refused_by_the_rule(task_id):
    assert "'.' or '..'" in task_id_problem(task_id)
    assert task_id_problem("...") is None and task_id_problem("a.b") is None and task_id_problem(".x") is None


@pytest.mark.parametrize("task_id", [".", ".."])
def test_the_api_refuses_a_dot_task_id(admin_app, api, task_id):
    client, token = api
    before = catalog_state(admin_app)
    response = client.post("/admin/api/tasks", headers=token, json={"id": task_id, "name": "Dots", "help": ""})
    assert response.status_code == 400
    assert "'id'" in json.dumps(response.get_json())
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("task_id", [".", ".."])
def test_publishing_a_dot_task_id_is_refused_not_redirected(admin_app, editor, task_id):
    client, csrf = editor
    before = catalog_state(admin_app)
    response = client.post("/admin/tasks/publish", data={"csrf_token": csrf, "action": "save", "task_id": task_id,
                                                         "name": "Dots", "help": "", "message": "",
                                                         "base_version": ""})
    assert response.status_code == 422, response.headers.get("Location")
    assert "must not be" in response.get_data(as_text=True)
    assert catalog_state(admin_app) == before


@pytest.mark.parametrize("task_id", [".", ".."])
def test_an_import_refuses_a_dot_task_id(task_id):
    with pytest.raises(ImportRejected) as refused:
        load_tasks_bytes(json.dumps({"id": task_id, "name": "Dots", "help": ""}).encode(), "tasks.jsonl")
    assert refused.value.errors[0].startswith("line 1: field 'id': must not be")

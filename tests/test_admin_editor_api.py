"""The editor's JSON API under /admin/api on SQLite and PostgreSQL: bearer tokens (and sessions),
editors only for writes, versions in the body, 409 with both versions when stale, 4xx JSON with
a message for bad input, versions and rollback."""
import pytest

from tests.conftest import signed_in


@pytest.fixture(scope="module")
def api(admin_app):
    """A client and the headers of an editor's and a viewer's API token."""
    accounts = admin_app.extensions["taskfinder"].accounts
    _, editor = accounts.create_token("eddie", actor="cli:test")
    _, viewer = accounts.create_token("vera", actor="cli:test")
    return (admin_app.test_client(), {"Authorization": f"Bearer {editor}"}, {"Authorization": f"Bearer {viewer}"})


def test_cases_are_created_updated_and_deleted_with_versions(admin_app, api):
    client, editor, _ = api
    created = client.post("/admin/api/cases", headers=editor, json={
        "query": "api made case", "gold": ["ersea.waitlist"], "rationale": "api", "category": "synonym"})
    assert created.status_code == 201
    case = created.get_json()
    assert case["version"] == 1 and case["gold"] == ["ersea.waitlist"]

    updated = client.put(f"/admin/api/cases/{case['id']}", headers=editor,
                         json={**case, "gold": ["ersea.waitlist", "reporting.waitlist-report"], "message": "both"})
    assert updated.status_code == 200 and updated.get_json()["version"] == 2
    stale = client.put(f"/admin/api/cases/{case['id']}", headers=editor, json={**case, "rationale": "mine"})
    assert stale.status_code == 409
    body = stale.get_json()
    assert body["theirs"]["version"] == 2 and body["theirs"]["gold"] == ["ersea.waitlist", "reporting.waitlist-report"]
    assert body["yours"]["rationale"] == "mine" and body["yours"]["version"] == 1 and body["error"]

    assert client.delete(f"/admin/api/cases/{case['id']}?version=1", headers=editor).status_code == 409
    assert client.delete(f"/admin/api/cases/{case['id']}", headers=editor).status_code == 400
    assert client.delete(f"/admin/api/cases/{case['id']}?version=2", headers=editor).get_json() == {"deleted": case["id"]}
    assert client.delete(f"/admin/api/cases/{case['id']}?version=2", headers=editor).status_code == 404
    kinds = [v["kind"] for v in client.get("/admin/api/versions?limit=3", headers=editor).get_json()["versions"]]
    assert kinds == ["case.delete", "case.update", "case.create"]


@pytest.mark.parametrize("body, needle", [
    ({"query": "x", "gold": ["no.such-task"]}, "unknown task id"),
    ({"query": "x", "gold": "ersea.waitlist"}, "field 'gold'"),
    ({"gold": []}, "'query' is a required property"),
    ({"query": "x", "gold": [], "surprise": 1}, "Additional properties"),
    ({"query": "x", "gold": [], "category": "vibes"}, "field 'category'"),
])
def test_bad_case_bodies_get_a_400_naming_the_field(api, body, needle):
    client, editor, _ = api
    response = client.post("/admin/api/cases", headers=editor, json=body)
    assert response.status_code == 400 and response.get_json()["error"] == "invalid test case"
    assert any(needle in e for e in response.get_json()["errors"])


def test_non_json_and_version_problems_are_4xx_json(api):
    client, editor, _ = api
    response = client.post("/admin/api/cases", headers=editor, data="query=x")
    assert response.status_code == 400 and "JSON" in response.get_json()["errors"][0]
    missing = client.put("/admin/api/cases/1", headers=editor, json={"query": "ASQ-3 Screening", "gold": []})
    assert missing.status_code == 400 and "version" in missing.get_json()["errors"][0]
    assert client.put("/admin/api/cases/99999", headers=editor,
                      json={"query": "nobody", "gold": [], "version": 1}).status_code == 404
    assert client.post("/admin/api/tasks/no.such-task/retire", headers=editor, json={"version": 1}).status_code == 404
    assert client.post("/admin/api/versions/99999/rollback", headers=editor).status_code == 404
    assert client.get("/admin/api/versions?limit=0", headers=editor).status_code == 400


def test_tasks_are_created_updated_and_retired(admin_app, api):
    client, editor, _ = api
    created = client.post("/admin/api/tasks", headers=editor, json={
        "id": "zz.api-task", "name": "API Task", "help": "made over the API", "aliases": ["robot task"]})
    assert created.status_code == 201 and created.get_json()["version"] == 1
    assert client.post("/admin/api/tasks", headers=editor, json={"id": "zz.api-task", "name": "Again",
                                                                  "help": ""}).status_code == 409
    task = created.get_json()
    renamed = client.put("/admin/api/tasks/zz.api-task", headers=editor, json={**task, "name": "API Task v2"})
    assert renamed.status_code == 200 and renamed.get_json()["name"] == "API Task v2"
    stale = client.put("/admin/api/tasks/zz.api-task", headers=editor, json={**task, "help": "mine"})
    assert stale.status_code == 409 and stale.get_json()["theirs"]["name"] == "API Task v2"
    moved = client.put("/admin/api/tasks/zz.api-task", headers=editor, json={**task, "id": "zz.other", "version": 2})
    assert moved.status_code == 400 and "cannot change" in moved.get_json()["errors"][0]
    assert client.post("/admin/api/tasks/zz.api-task/retire", headers=editor, json={"version": 1}).status_code == 409
    assert client.post("/admin/api/tasks/zz.api-task/retire", headers=editor, json={}).status_code == 400
    retired = client.post("/admin/api/tasks/zz.api-task/retire", headers=editor, json={"version": 2})
    assert retired.status_code == 200 and retired.get_json()["active"] is False
    assert admin_app.extensions["taskfinder"].store.versions(limit=1)[0].kind == "task.retire"


def test_versions_list_detail_and_rollback(admin_app, api):
    client, editor, viewer = api
    store = admin_app.extensions["taskfinder"].store
    mark = client.get("/admin/api/versions?limit=1", headers=viewer).get_json()["versions"][0]["id"]
    case = client.post("/admin/api/cases", headers=editor, json={"query": "to be rolled back", "gold": []}).get_json()
    detail = client.get(f"/admin/api/versions/{mark + 1}", headers=viewer).get_json()
    assert detail["kind"] == "case.create" and detail["changes"][0]["after"]["query"] == "to be rolled back"

    assert client.post(f"/admin/api/versions/{mark}/rollback", headers=viewer).status_code == 403
    rolled = client.post(f"/admin/api/versions/{mark}/rollback", headers=editor,
                         json={"message": "undo", "based_on": mark + 1})
    assert rolled.status_code == 200
    assert rolled.get_json()["rolled_back_to"] == mark and rolled.get_json()["version"] == mark + 2
    assert all(c.id != case["id"] for c in store.cases())
    newest = store.version(mark + 2)
    assert (newest.kind, newest.message, newest.actor) == ("rollback", "undo", "user:eddie")


def test_viewer_tokens_and_sessions_without_csrf_cannot_write(admin_app, api):
    client, _, viewer = api
    assert client.post("/admin/api/cases", headers=viewer, json={"query": "v", "gold": []}).status_code == 403
    session, _ = signed_in(admin_app, "eddie")
    response = session.post("/admin/api/cases", json={"query": "no csrf", "gold": []})
    assert response.status_code == 400 and "CSRF" in response.get_json()["error"]
    assert admin_app.test_client().post("/admin/api/cases", json={"query": "anon", "gold": []}).status_code == 401

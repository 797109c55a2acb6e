"""Access to every /admin route, found by walking `app.url_map` rather than listing them, so a
route added later is covered without anyone remembering to add it here:

* anonymous callers are refused everywhere but the login page and static files (pages redirect
  to the login page, /admin/api answers 401 JSON);
* viewers are refused (403) every method other than GET/HEAD/OPTIONS, except logging out.
"""
import pytest
from flask import Flask, jsonify
from werkzeug.routing import IntegerConverter, Rule

from admin.blueprint import PUBLIC_ENDPOINTS, SAFE_METHODS, VIEWER_WRITES
from tests.conftest import build_app, make_settings, signed_in

# The endpoints that exist today; the walk below checks all of them and any added later.
KNOWN_ENDPOINTS = {"admin.login", "admin.logout", "admin.dashboard", "admin.tasks_page", "admin.task_page",
                   "admin.cases_page", "admin.static", "admin.api.whoami", "admin.api.tasks", "admin.api.cases",
                   # the lexicon editor
                   "admin.case_page", "admin.case_new", "admin.case_edit", "admin.case_preview", "admin.case_publish",
                   "admin.task_new", "admin.task_edit", "admin.task_preview", "admin.task_publish",
                   "admin.versions_page", "admin.version_page", "admin.version_rollback", "admin.import_export_page",
                   "admin.import_upload", "admin.export_file", "admin.api.task_search", "admin.api.case_create",
                   "admin.api.case_update", "admin.api.case_delete", "admin.api.task_create", "admin.api.task_update",
                   "admin.api.task_retire", "admin.api.versions", "admin.api.version", "admin.api.version_rollback"}


def admin_rules(app: Flask) -> list[Rule]:
    return [rule for rule in app.url_map.iter_rules() if rule.rule == "/admin" or rule.rule.startswith("/admin/")]


def sample_url(app: Flask, rule: Rule) -> str:
    """A concrete URL for `rule`, with an argument value its converters accept."""
    values = {name: 1 if isinstance(rule._converters[name], IntegerConverter) else "x" for name in rule.arguments}
    return app.url_map.bind("localhost").build(rule.endpoint, values, method=next(iter(rule.methods)))


def writes(rule: Rule) -> list[str]:
    return sorted(rule.methods - SAFE_METHODS)


def is_api(rule: Rule) -> bool:
    return rule.rule.startswith("/admin/api/")


def anonymous_violations(app: Flask) -> list[str]:
    """Every (method, URL) under /admin that an anonymous caller is not properly refused."""
    client, found = app.test_client(), []
    for rule in admin_rules(app):
        if rule.endpoint in PUBLIC_ENDPOINTS:
            continue
        url = sample_url(app, rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            response = client.open(url, method=method)
            if is_api(rule):
                ok = response.status_code == 401 and response.is_json
            else:
                ok = response.status_code == 302 and response.headers["Location"].startswith("/admin/login")
            if not ok:
                found.append(f"{method} {url} -> {response.status_code}")
    return found


def viewer_violations(app: Flask, client, csrf: str) -> list[str]:
    """Every write under /admin that a signed-in viewer (with a valid CSRF token) is not refused."""
    found = []
    for rule in admin_rules(app):
        if rule.endpoint in PUBLIC_ENDPOINTS | VIEWER_WRITES:
            continue
        url = sample_url(app, rule)
        for method in writes(rule):
            response = client.open(url, method=method, data={"csrf_token": csrf}, headers={"X-CSRF-Token": csrf})
            if response.status_code != 403:
                found.append(f"{method} {url} -> {response.status_code}")
    return found


def test_the_walk_sees_every_admin_route(admin_app):
    endpoints = {rule.endpoint for rule in admin_rules(admin_app)}
    assert KNOWN_ENDPOINTS <= endpoints
    assert all(endpoint.startswith("admin.") for endpoint in endpoints), "an /admin route outside the admin blueprint"
    assert PUBLIC_ENDPOINTS == {"admin.login", "admin.static"}
    assert VIEWER_WRITES == {"admin.logout", "admin.case_preview", "admin.task_preview",
                             "admin.start_evaluation"}  # previews and evaluations write no catalog data


def test_anonymous_callers_are_refused_on_every_admin_route(admin_app):
    assert anonymous_violations(admin_app) == []


def test_viewers_are_refused_every_admin_write(admin_app):
    client, csrf = signed_in(admin_app, "vera")
    assert viewer_violations(admin_app, client, csrf) == []


def test_viewers_may_read_every_admin_page(admin_app):
    client, _ = signed_in(admin_app, "vera")
    for rule in admin_rules(admin_app):
        if "GET" in rule.methods and not rule.arguments and rule.endpoint != "admin.login":
            assert client.get(rule.rule).status_code == 200, rule.rule
    assert client.get("/admin/login").status_code == 302  # already signed in: on to the dashboard


# -- the policy applies to routes nobody has written yet -------------------------------------------
@pytest.fixture
def probed_app(tmp_path, shared_cache_dir):
    """A fresh app with write routes added the way a future editor view would be (on the admin
    blueprint's endpoints), before its first request."""
    from tests.conftest import FAST_HASHER

    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="p" * 40), [], [])
    app.add_url_rule("/admin/probe/<int:item>", "admin.probe", lambda item: "written", methods=["POST", "DELETE"])
    app.add_url_rule("/admin/api/probe", "admin.api.probe", lambda: jsonify(written=True), methods=["PUT"])
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
    accounts.create_user("eddie", "a long enough password", "editor", actor="cli:test")
    return app


def test_new_write_routes_are_closed_to_anonymous_callers_and_viewers(probed_app):
    assert anonymous_violations(probed_app) == []
    client, csrf = signed_in(probed_app, "vera")
    assert viewer_violations(probed_app, client, csrf) == []
    assert {f"{m} {sample_url(probed_app, r)}" for r in admin_rules(probed_app) for m in writes(r)} >= {
        "POST /admin/probe/1", "DELETE /admin/probe/1", "PUT /admin/api/probe"}


def test_editors_may_write_with_a_csrf_token_or_an_api_token(probed_app):
    client, csrf = signed_in(probed_app, "eddie")
    assert client.post("/admin/probe/1").status_code == 400  # no CSRF token
    assert client.post("/admin/probe/1", data={"csrf_token": "forged"}).status_code == 400
    assert client.post("/admin/probe/1", data={"csrf_token": csrf}).get_data(as_text=True) == "written"
    assert client.put("/admin/api/probe", headers={"X-CSRF-Token": csrf}).get_json() == {"written": True}
    _, token = probed_app.extensions["taskfinder"].accounts.create_token("eddie", actor="cli:test")
    api = probed_app.test_client()
    assert api.put("/admin/api/probe", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    _, viewer_token = probed_app.extensions["taskfinder"].accounts.create_token("vera", actor="cli:test")
    assert api.put("/admin/api/probe", headers={"Authorization": f"Bearer {viewer_token}"}).status_code == 403


def test_the_walk_catches_an_admin_route_outside_the_blueprint(tmp_path, shared_cache_dir):
    """The failure this test exists for: a route under /admin that bypasses the admin blueprint's policy."""
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="p" * 40), [], [])
    app.add_url_rule("/admin/rogue", "rogue", lambda: "open to all", methods=["GET", "POST"])
    assert anonymous_violations(app) == ["GET /admin/rogue -> 200", "POST /admin/rogue -> 200"]

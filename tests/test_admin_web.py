"""The admin web on SQLite and PostgreSQL: sign-in, session cookies, CSRF, throttling, the
read-only pages, and bearer tokens on /admin/api. (Route-by-route access: test_admin_access.py.)"""

import pytest

import time

from limits.storage import MemoryStorage

from admin.throttle import LoginThrottle
from tests.conftest import XSS_TASK_ID, admin_login, csrf_from, signed_in


# -- sign-in -----------------------------------------------------------------------------------
def test_login_sets_a_hardened_session_cookie_and_lands_on_the_dashboard(admin_app):
    client = admin_app.test_client()
    response = admin_login(client, "Vera")
    assert response.status_code == 302 and response.headers["Location"] == "/admin/"
    [cookie] = [c for c in response.headers.getlist("Set-Cookie") if c.startswith("taskfinder_admin=")]
    assert {"Secure", "HttpOnly", "SameSite=Lax", "Path=/admin"} <= {p.strip() for p in cookie.split(";")}
    assert "Expires=" in cookie  # permanent: SESSION_LIFETIME_S
    page = client.get("/admin/")
    assert page.status_code == 200 and "vera (viewer)" in page.get_data(as_text=True)


def test_the_secure_flag_can_be_turned_off_for_local_http(tmp_path, shared_cache_dir):
    from tests.conftest import build_app, make_settings

    app = build_app(make_settings(tmp_path, shared_cache_dir, SESSION_COOKIE_SECURE=0), [], [])
    cookie = app.test_client().get("/admin/login").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "Secure" not in cookie


def test_wrong_password_and_unknown_user_get_the_same_answer(admin_app):
    client = admin_app.test_client()
    wrong = admin_login(client, "vera", "not the password", address="198.51.100.1")
    unknown = admin_login(client, "nobody", "not the password", address="198.51.100.1")
    assert wrong.status_code == unknown.status_code == 401
    for response in (wrong, unknown):
        assert "Unknown user name or wrong password." in response.get_data(as_text=True)
    assert client.get("/admin/").status_code == 302


def test_login_without_a_valid_csrf_token_is_refused(admin_app):
    client = admin_app.test_client()
    client.get("/admin/login")
    data = {"username": "vera", "password": "a long enough password"}
    assert client.post("/admin/login", data=data).status_code == 400
    assert client.post("/admin/login", data={**data, "csrf_token": "forged"}).status_code == 400
    assert admin_app.test_client().post("/admin/login", data={**data, "csrf_token": ""}).status_code == 400


@pytest.mark.parametrize("target, lands", [
    ("/admin/cases?q=bus", "/admin/cases?q=bus"),
    ("https://evil.example/admin/", "/admin/"),
    ("//evil.example/admin/", "/admin/"),
    ("/\\evil.example", "/admin/"),
    ("/api/search?q=x", "/admin/"),
    ("javascript:alert(1)", "/admin/"),
])
def test_after_login_only_admin_paths_of_this_site_are_followed(admin_app, target, lands):
    response = admin_login(admin_app.test_client(), "vera", next=target)
    assert response.headers["Location"] == lands


def test_anonymous_page_visits_come_back_after_login(admin_app):
    client = admin_app.test_client()
    redirect = client.get("/admin/cases?q=bus")
    assert redirect.status_code == 302 and redirect.headers["Location"].startswith("/admin/login?next=")
    login_page = client.get(redirect.headers["Location"]).get_data(as_text=True)
    assert 'name="next" value="/admin/cases?q=bus"' in login_page


def test_repeated_failures_lock_out_that_name_from_that_address(admin_app):
    client = admin_app.test_client()
    for _ in range(5):
        assert admin_login(client, "eddie", "wrong password!", address="192.0.2.7").status_code == 401
    locked = admin_login(client, "eddie", address="192.0.2.7")  # the right password, too late
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.get_data(as_text=True)
    assert admin_login(client, "eddie", address="192.0.2.8").status_code == 302  # another address


def test_the_throttle_forgets_after_its_window_and_after_a_success():
    throttle = LoginThrottle(MemoryStorage(), max_failures=3, window_s=1)
    for _ in range(3):
        throttle.failed("Eddie ", "192.0.2.1")
    assert throttle.locked_for("eddie", "192.0.2.1").seconds == 1   # the name is normalised
    time.sleep(1.1)
    assert throttle.locked_for("eddie", "192.0.2.1").seconds == 0
    throttle.failed("eddie", "192.0.2.1")
    assert throttle.locked_for("eddie", "192.0.2.1").seconds == 0  # the old failures left the window
    throttle.failed("eddie", "192.0.2.1")
    throttle.succeeded("eddie", "192.0.2.1")
    throttle.failed("eddie", "192.0.2.1")
    throttle.failed("eddie", "192.0.2.1")
    assert throttle.locked_for("eddie", "192.0.2.1").seconds == 0


def test_the_throttle_drops_failures_past_its_window_as_new_ones_arrive():
    storage = MemoryStorage()
    throttle = LoginThrottle(storage, max_failures=3, window_s=1)
    for i in range(100):
        throttle.failed(f"user{i}", "addr")
    assert sum(len(entries) for entries in storage.events.values()) == 100
    time.sleep(1.1)
    throttle.failed("someone", "addr")
    time.sleep(0.1)   # limits' MemoryStorage expires entries on a timer started by each new one
    assert sum(len(entries) for entries in storage.events.values()) == 1


def test_logout_needs_csrf_and_ends_the_session(admin_app):
    client, csrf = signed_in(admin_app, "vera")
    assert client.post("/admin/logout").status_code == 400
    assert client.get("/admin/").status_code == 200
    response = client.post("/admin/logout", data={"csrf_token": csrf})
    assert response.status_code == 302 and response.headers["Location"] == "/admin/login"
    assert client.get("/admin/").status_code == 302


def test_a_new_csrf_token_after_login(admin_app):
    client = admin_app.test_client()
    before = csrf_from(client.get("/admin/login").get_data(as_text=True))
    admin_login(client, "vera")
    assert csrf_from(client.get("/admin/").get_data(as_text=True)) != before


def test_disabling_a_user_or_changing_their_role_ends_their_open_session(admin_app):
    accounts = admin_app.extensions["taskfinder"].accounts
    accounts.create_user("temp.user", "a long enough password", "editor", actor="cli:test")
    client, _ = signed_in(admin_app, "temp.user")
    accounts.set_role("temp.user", "viewer", actor="cli:test")
    assert client.get("/admin/").status_code == 302
    client, _ = signed_in(admin_app, "temp.user")
    accounts.set_active("temp.user", False, actor="cli:test")
    assert client.get("/admin/").status_code == 302
    assert admin_login(admin_app.test_client(), "temp.user").status_code == 401


def test_a_cookie_signed_with_another_key_is_not_a_session(admin_app, tmp_path, shared_cache_dir):
    from tests.conftest import build_app, make_settings

    other = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="o" * 40), [], [])
    other.extensions["taskfinder"].accounts.create_user("vera", "a long enough password", "editor", actor="t")
    forged_client, _ = signed_in(other, "vera")
    cookie = forged_client.get_cookie("taskfinder_admin", path="/admin")
    client = admin_app.test_client()
    client.set_cookie("taskfinder_admin", cookie.value, path="/admin")
    assert client.get("/admin/").status_code == 302


def test_without_secret_key_each_data_directory_has_its_own_stable_key(tmp_path, shared_cache_dir):
    """Issue 17 item 2: never a random key per process (gunicorn's workers would refuse each
    other's sessions); one key per data directory (infra.secret_key; shared between processes:
    tests/test_hardening_ops.py), kept across restarts."""
    from app import create_app
    from tests.conftest import make_settings

    first = create_app(make_settings(tmp_path / "a", shared_cache_dir))
    second = create_app(make_settings(tmp_path / "b", shared_cache_dir))
    assert first.secret_key and second.secret_key and first.secret_key != second.secret_key
    assert len(first.secret_key) >= 32
    assert create_app(make_settings(tmp_path / "a", shared_cache_dir)).secret_key == first.secret_key


# -- pages -------------------------------------------------------------------------------------
def test_pages_carry_security_headers_and_are_not_cached(admin_app):
    client, _ = signed_in(admin_app, "vera")
    response = client.get("/admin/tasks")
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store"
    assert client.get("/admin/static/admin.css").status_code == 200


def test_tasks_list_filters(admin_app):
    client, _ = signed_in(admin_app, "vera")
    page = client.get("/admin/tasks", query_string={"q": "cacfp"}).get_data(as_text=True)
    assert "nutrition.cacfp-claim" in page and "health.asq3-screening" not in page
    fiscal = client.get("/admin/tasks", query_string={"role": "fiscal"}).get_data(as_text=True)
    assert "nutrition.cacfp-claim" in fiscal and "nutrition.menus" not in fiscal
    open_only = client.get("/admin/tasks", query_string={"role": "-", "q": "cacfp"}).get_data(as_text=True)
    assert "nutrition.cacfp-claim" not in open_only and "nutrition.menus" in open_only
    assert "201 tasks" in client.get("/admin/tasks", query_string={"status": "all"}).get_data(as_text=True)
    second = client.get("/admin/tasks", query_string={"page": 2}).get_data(as_text=True)
    assert "Page 2 of 5" in second


def test_task_detail_lists_the_cases_naming_it(admin_app):
    client, _ = signed_in(admin_app, "vera")
    page = client.get("/admin/tasks/health.asq3-screening")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "ASQ-3 Screening" in text and "Test cases naming this task" in text and "<q>" in text
    assert client.get("/admin/tasks/no.such-task").status_code == 404


def test_cases_list_filters(admin_app):
    client, _ = signed_in(admin_app, "vera")
    everything = client.get("/admin/cases").get_data(as_text=True)
    narrowed = client.get("/admin/cases", query_string={"task": "transport.bus-routes"}).get_data(as_text=True)
    assert "transport.bus-routes" in narrowed and len(narrowed) < len(everything)
    out_of_scope = client.get("/admin/cases", query_string={"task": "-"}).get_data(as_text=True)
    assert "out of scope" in out_of_scope


def test_catalog_text_is_escaped_not_executed(admin_app):
    client, _ = signed_in(admin_app, "vera")
    for url in (f"/admin/tasks/{XSS_TASK_ID}", "/admin/tasks?category=zz", "/admin/tasks?q=%3Cscript%3E"):
        text = client.get(url).get_data(as_text=True)
        assert "<script>alert" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(" in client.get(f"/admin/tasks/{XSS_TASK_ID}").get_data(as_text=True)
    echoed = client.get("/admin/cases", query_string={"q": '"><script>x</script>'}).get_data(as_text=True)
    assert "<script>x</script>" not in echoed


# -- /admin/api with bearer tokens ----------------------------------------------------------------
def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_api_tokens_work_without_a_session_until_revoked(admin_app):
    accounts = admin_app.extensions["taskfinder"].accounts
    info, token = accounts.create_token("eddie", actor="cli:test", label="ci")
    client = admin_app.test_client()
    assert client.get("/admin/api/whoami", headers=bearer(token)).get_json() == \
        {"name": "eddie", "role": "editor", "auth": "token"}
    cases = client.get("/admin/api/cases", headers=bearer(token), query_string={"task": "transport.bus-routes"})
    body = cases.get_json()
    assert cases.status_code == 200 and body["count"] == len(body["cases"]) > 0
    assert all("transport.bus-routes" in c["gold"] for c in body["cases"])
    tasks = client.get("/admin/api/tasks", headers=bearer(token), query_string={"q": "cacfp"}).get_json()
    assert "nutrition.cacfp-claim" in [t["id"] for t in tasks["tasks"]]
    accounts.revoke_token(info.id, actor="cli:test")
    refused = client.get("/admin/api/whoami", headers=bearer(token))
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert refused.get_json() == {"error": "authentication required"}


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "Bearer tfa_forged", "Basic dmVyYTpwYXNz", "tfa_x"])
def test_bad_authorization_headers_get_401(admin_app, header):
    response = admin_app.test_client().get("/admin/api/cases", headers={"Authorization": header})
    assert response.status_code == 401 and response.is_json


def test_a_bad_bearer_token_does_not_fall_back_to_the_session(admin_app):
    client, _ = signed_in(admin_app, "vera")
    assert client.get("/admin/api/whoami").get_json()["auth"] == "session"
    assert client.get("/admin/api/whoami", headers=bearer("tfa_forged")).status_code == 401


def test_a_disabled_users_tokens_are_refused(admin_app):
    accounts = admin_app.extensions["taskfinder"].accounts
    accounts.create_user("robot", "a long enough password", "viewer", actor="cli:test")
    _, token = accounts.create_token("robot", actor="cli:test")
    client = admin_app.test_client()
    assert client.get("/admin/api/whoami", headers=bearer(token)).status_code == 200
    accounts.set_active("robot", False, actor="cli:test")
    assert client.get("/admin/api/whoami", headers=bearer(token)).status_code == 401

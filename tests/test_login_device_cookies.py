"""Issue 33 item 12: a botnet filling an account's login window must not lock its owner out.

OWASP's "device cookies" (Slow Down Online Guessing Attacks with Device Cookies): a successful
sign-in leaves a signed device cookie naming the account; an attempt that presents a valid one
for that account skips the account-wide window (LOGIN_ACCOUNT_MAX_FAILURES, the one anybody can
fill) and is counted in its own per-device window instead. Everything goes through the real app
and the real login form (CSRF included); every client is a separate browser.
"""
from __future__ import annotations

import re
import time

import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from admin.throttle import DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE_S, DEVICE_COOKIE_SALT, LoginThrottle
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, admin_login, build_app, close_app, csrf_from, make_settings

SECRET = "s" * 40
OWNER_HOME = "203.0.113.5"


def make_app(tmp_path, shared_cache_dir, **env):
    """An empty catalog (the throttle needs no tasks) with its own throttle windows, plus
    `eddie` and `vera`."""
    settings = make_settings(tmp_path, shared_cache_dir, **{"SECRET_KEY": SECRET, "EMBEDDINGS_ENABLED": "0", **env})
    app = build_app(settings, [], [])
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
    accounts.create_user("vera", ADMIN_PASSWORD, "viewer", actor="cli:test")
    return app


@pytest.fixture
def app(tmp_path, shared_cache_dir):
    app = make_app(tmp_path, shared_cache_dir)
    # the account back-off (issue 42 item 6) on a stopped clock: the botnet's last guess slows
    # every later attempt from a new browser for as long as a test runs, however slow the machine
    now = time.time()
    app.extensions["taskfinder_admin"].throttle.clock = lambda: now
    yield app
    close_app(app)


def botnet_fills_the_account_window(app, name: str = "eddie", addresses: int = 10, each: int = 2) -> None:
    """The audit's scenario: 20 wrong passwords from 10 addresses (2 each: no address's own
    window of LOGIN_MAX_FAILURES=5 fills), from browsers that never signed in."""
    for i in range(addresses):
        bot = app.test_client()
        for _ in range(each):
            assert admin_login(bot, name, "wrong password!", address=f"198.51.100.{i}").status_code == 401


def known_device(app, name: str = "eddie", address: str = OWNER_HOME):
    """A browser where `name` signed in earlier (so it holds a device cookie) and signed out
    again (the login form redirects a signed-in browser away)."""
    client = app.test_client()
    assert admin_login(client, name, address=address).status_code == 302
    sign_out(client)
    return client


def sign_out(client) -> None:
    assert client.post("/admin/logout", data={"csrf_token": csrf_from(client.get("/admin/").get_data(as_text=True))},
                       environ_base={"REMOTE_ADDR": OWNER_HOME}).status_code == 302


def device_cookie_of(client) -> str:
    cookie = client.get_cookie(DEVICE_COOKIE, path="/admin/login")
    assert cookie is not None, "no device cookie after a successful sign-in"
    return cookie.value


def browser_with(app, cookie_value: str):
    """A fresh browser that presents `cookie_value` as its device cookie."""
    client = app.test_client()
    client.set_cookie(DEVICE_COOKIE, cookie_value, path="/admin/login")
    return client


def metric(app, name: str, **labels) -> float:
    text = app.test_client().get("/metrics").get_data(as_text=True)
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    match = re.search("^" + re.escape(name) + r"\{" + re.escape(wanted) + r"\} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


# -- the cookie itself --------------------------------------------------------------------------
def test_a_sign_in_leaves_a_signed_httponly_strict_device_cookie(app):
    response = admin_login(app.test_client(), "Eddie", address=OWNER_HOME)
    assert response.status_code == 302
    [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(DEVICE_COOKIE + "=")]
    attributes = {part.strip() for part in header.split(";")}
    assert {"Secure", "HttpOnly", "SameSite=Strict", "Path=/admin/login"} <= attributes
    assert f"Max-Age={DEVICE_COOKIE_MAX_AGE_S}" in attributes
    value = header.split(";")[0].split("=", 1)[1]
    payload = URLSafeTimedSerializer(SECRET, salt=DEVICE_COOKIE_SALT).loads(value, max_age=60)
    assert payload["account"] == "eddie" and re.fullmatch(r"[0-9a-f]{32}", payload["device"])


def test_a_failed_sign_in_leaves_no_device_cookie(app):
    response = admin_login(app.test_client(), "eddie", "wrong password!", address=OWNER_HOME)
    assert response.status_code == 401
    assert not any(h.startswith(DEVICE_COOKIE + "=") for h in response.headers.getlist("Set-Cookie"))


def test_the_device_cookie_is_not_secure_when_sessions_are_not(tmp_path, shared_cache_dir):
    app = make_app(tmp_path, shared_cache_dir, SESSION_COOKIE_SECURE=0)
    try:
        response = admin_login(app.test_client(), "eddie", address=OWNER_HOME)
        [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(DEVICE_COOKIE + "=")]
        assert "HttpOnly" in header and "SameSite=Strict" in header and "Secure" not in header
    finally:
        close_app(app)


# -- the audit's scenario -----------------------------------------------------------------------
def test_a_botnet_filling_the_account_window_does_not_lock_out_the_owners_known_device(app):
    owner = known_device(app)   # an earlier sign-in
    botnet_fills_the_account_window(app)

    newcomer = admin_login(app.test_client(), "eddie", address="192.0.2.99")   # the right password
    assert newcomer.status_code == 429 and "Too many failed sign-ins" in newcomer.get_data(as_text=True)
    assert 1 <= int(newcomer.headers["Retry-After"]) <= 15 * 60

    assert admin_login(owner, "eddie", address=OWNER_HOME).status_code == 302
    assert owner.get("/admin/").status_code == 200
    sign_out(owner)
    assert admin_login(owner, "eddie", address="192.0.2.50").status_code == 302   # travelling: the device counts
    # the owner's sign-in did not empty the botnet's window: untrusted browsers stay throttled
    assert admin_login(app.test_client(), "eddie", address="192.0.2.98").status_code == 429


# -- no exemption without a valid cookie for this account ---------------------------------------
class _LongAgoSigner(TimestampSigner):
    """Signs as the app did DEVICE_COOKIE_MAX_AGE_S + 1 hour ago: an expired device cookie."""

    def get_timestamp(self) -> int:
        return int(time.time()) - DEVICE_COOKIE_MAX_AGE_S - 3600


def _bad_cookies(genuine: str) -> dict[str, str]:
    body, signature = genuine.rsplit(".", 1)
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    payload = {"account": "eddie", "device": "0" * 32}
    return {
        "tampered signature": f"{body}.{flipped}",
        "forged with another key": URLSafeTimedSerializer("another key" * 4, salt=DEVICE_COOKIE_SALT).dumps(payload),
        "unsigned": "eddie",
        "expired": URLSafeTimedSerializer(SECRET, salt=DEVICE_COOKIE_SALT, signer=_LongAgoSigner).dumps(payload),
        "another salt (e.g. a session cookie)": URLSafeTimedSerializer(SECRET, salt="cookie-session").dumps(payload),
    }


def test_forged_tampered_expired_or_unsigned_device_cookies_give_no_exemption(app):
    genuine = admin_login(app.test_client(), "eddie", address=OWNER_HOME)
    assert genuine.status_code == 302
    good = device_cookie_of_response(genuine)
    botnet_fills_the_account_window(app)
    for what, value in _bad_cookies(good).items():
        assert admin_login(browser_with(app, value), "eddie", address=OWNER_HOME).status_code == 429, what
    assert admin_login(browser_with(app, good), "eddie", address=OWNER_HOME).status_code == 302


def test_a_device_cookie_of_another_account_gives_no_exemption(app):
    shared = known_device(app, "vera")   # this browser knows vera, not eddie
    botnet_fills_the_account_window(app, "eddie")
    assert admin_login(shared, "eddie", address=OWNER_HOME).status_code == 429
    assert admin_login(shared, "vera", address=OWNER_HOME).status_code == 302


def device_cookie_of_response(response) -> str:
    [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(DEVICE_COOKIE + "=")]
    return header.split(";")[0].split("=", 1)[1]


# -- a stolen device cookie cannot guess without limit --------------------------------------------
def test_a_device_cookies_own_window_locks_after_its_failures(app):
    owner = known_device(app)
    thief = browser_with(app, device_cookie_of(owner))
    for i in range(5):   # LOGIN_MAX_FAILURES, each from another address: no (name, address) window fills
        assert admin_login(thief, "eddie", "wrong password!", address=f"192.0.2.{i}").status_code == 401
    refused = admin_login(thief, "eddie", address="192.0.2.200")   # even the right password
    assert refused.status_code == 429 and "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert int(refused.headers["Retry-After"]) >= 1
    assert metric(app, "taskfinder_ratelimited_responses_total", limit="login_device") == 1
    # its failures went to the device's window, not the account's: a newcomer is not locked out
    assert admin_login(app.test_client(), "eddie", address="192.0.2.201").status_code == 302


def test_the_per_address_window_still_holds_a_known_device(app):
    owner = known_device(app)
    for _ in range(5):
        assert admin_login(owner, "eddie", "wrong password!", address="192.0.2.7").status_code == 401
    assert admin_login(owner, "eddie", address="192.0.2.7").status_code == 429


def test_a_success_on_the_device_empties_its_window(app):
    owner = known_device(app)
    for round_ in range(2):   # 4 + 4 failures, a success between: never 5 in the device's window
        for i in range(4):
            assert admin_login(owner, "eddie", "wrong password!", address=f"192.0.2.{round_}{i}").status_code == 401
        assert admin_login(owner, "eddie", address=f"192.0.2.{round_}9").status_code == 302
        sign_out(owner)


# -- the throttle alone ---------------------------------------------------------------------------
def test_the_device_window_is_counted_in_this_process_while_redis_is_down():
    """The device window is a login window: never unthrottled when Redis cannot be asked."""
    from web.limits import ResilientStorage

    throttle = LoginThrottle(ResilientStorage("taskfinder+redis://127.0.0.1:1/0", key_prefix="x:"), 2, 60, 3)
    for _ in range(2):
        throttle.failed("eddie", f"192.0.2.{_}", device="ab" * 16)
    lockout = throttle.locked_for("eddie", "192.0.2.9", device="ab" * 16)
    assert lockout.window == "login_device" and 59 <= lockout.seconds <= 60
    assert throttle.locked_for("eddie", "192.0.2.9", device="cd" * 16).seconds == 0

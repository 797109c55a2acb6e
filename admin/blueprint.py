"""The admin blueprint and its access policy: deny by default, in one place.

Every request routed to the admin blueprint (pages, `admin_blueprints`) or its nested `api` and
`analytics` blueprints passes `enforce_policy` before any view runs:

* anonymous callers are refused everywhere except PUBLIC_ENDPOINTS (the login page, static
  files): pages redirect to the login page, /admin/api answers 401 JSON;
* a method other than GET/HEAD/OPTIONS needs the `editor` role (403 otherwise), except the few
  VIEWER_WRITES that any signed-in user may do (logging out, previewing an edit,
  starting an offline evaluation);
* such a request, unless authenticated by an API token, must carry the session's CSRF token.

A view therefore cannot forget its check, and tests/test_admin_access.py walks `app.url_map` to
prove it for every /admin route, including ones added later.

Sessions: Flask-Login over Flask's signed session cookie. It is a small, well-known library that
loads the user on each request (`user_loader`) and keeps `current_user` in templates, while a
signed cookie needs no session table. What a client-side cookie cannot do by itself, end a
session early, the user's auth epoch does (admin.accounts.Account.get_id): a role change, a
disable or a new password invalidates every open session. The cookie is HttpOnly, SameSite=Lax,
Secure unless SESSION_COOKIE_SECURE=0, limited to /admin, and expires after SESSION_LIFETIME_S
(itsdangerous checks the signed timestamp, so an old cookie is refused server-side too).

CSRF: Flask-WTF's CSRFProtect, with its app-wide check off (WTF_CSRF_CHECK_DEFAULT=False) and
called here instead (`csrf.protect()`), the pattern its documentation gives for a check that
depends on the request: the public API (no cookies, no forms) is never checked, and admin
requests authenticated by a bearer token are exempt because a browser never sends one on its
own. Forms carry `csrf_token()` (a signed token bound to this session, valid for the session's
life); scripts send it as the X-CSRF-Token header. Over HTTPS it also requires a same-origin
Referer (WTF_CSRF_SSL_STRICT).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from flask import Blueprint, Flask, current_app, g, jsonify, redirect, render_template, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from flask_login import LoginManager, current_user
from flask_wtf.csrf import CSRFError, CSRFProtect

from admin.accounts import Account, AccountStore
from evaluation.impact import ImpactMemo
from admin.analytics import analytics_pages_bp
from infra.secret_key import shared_secret_key
from admin.throttle import LoginThrottle
from infra.words import counted, noun
from api.roles import bearer_token
from settings import Settings

log = logging.getLogger(__name__)

PUBLIC_ENDPOINTS = frozenset({"admin.login", "admin.static"})
# Viewers may sign out and preview an edit (a POST that writes nothing); publishing is the editors'.
VIEWER_WRITES = frozenset({"admin.logout", "admin.case_preview", "admin.task_preview",
                           "admin.start_evaluation"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
csrf = CSRFProtect()
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@dataclass
class AdminState:
    """What the admin views need beyond `Services`: the login throttle, and the previews already
    made (evaluation.impact.ImpactMemo: a confirmation page shown again does not preview again)."""

    throttle: LoginThrottle
    previews: ImpactMemo = field(default_factory=ImpactMemo)


# -- setup ---------------------------------------------------------------------------------
ADMIN = "admin"   # the /admin blueprint's name (its endpoints are `admin.*`)


def admin_blueprints() -> tuple[Blueprint, Blueprint]:
    """(pages, api): a new /admin blueprint (endpoints `admin.*`, templates and static files
    beside this module) with its policy, and the /admin/api blueprint nested in it (JSON for
    automation, endpoints `admin.api.*`), with /admin/analytics (admin/analytics/pages.py) nested
    beside it. They carry no view yet: admin.routes.install_admin has each view module attach
    its routes (its `register(pages, api)`), so importing a module attaches nothing. New for
    each app, because Flask refuses a route added to a blueprint that an app has registered.

    `enforce_policy` is the blueprint's first before-request hook, so every view module's own
    hooks (admin.editor's checks of the text written) run after the access policy."""
    pages = Blueprint(ADMIN, __name__, url_prefix="/admin", template_folder="templates", static_folder="static")
    pages.before_request(enforce_policy)
    pages.after_request(security_headers)
    pages.context_processor(template_helpers)
    pages.add_app_template_filter(counted, "counted")   # "1 test case", "3 test cases" (infra.words)
    pages.add_app_template_filter(noun, "noun")
    api = Blueprint("api", __name__, url_prefix="/api")
    pages.register_blueprint(api)
    pages.register_blueprint(analytics_pages_bp)
    return pages, api


class AdminOnlySessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, opened only under SESSION_COOKIE_PATH (/admin), the only
    place the cookie is ever sent. Elsewhere (the public API, the widget, /metrics) a request gets
    Flask's null session: it never reads or writes a cookie, and it skips building a signing
    serializer per request, which was a sixth of a cached type-ahead answer's time."""

    def open_session(self, app, request):
        prefix = app.config["SESSION_COOKIE_PATH"]
        if request.path != prefix and not request.path.startswith(prefix.rstrip("/") + "/"):
            return None   # Flask then uses its NullSession
        return super().open_session(app, request)


def init_admin(app: Flask, settings: Settings, accounts: AccountStore, throttle: LoginThrottle) -> None:
    """Configure sessions and Flask-Login on `app` for the admin blueprint (install_admin then
    registers it); `throttle` counts failed logins (admin.throttle.build_throttle: in
    Redis or in this process)."""
    # Never a hard-coded key (anyone could forge a session), never one per process (gunicorn's
    # workers would refuse each other's sessions): SECRET_KEY, else the data directory's shared key.
    app.secret_key = settings.secret_key or shared_secret_key(settings.data_dir)
    app.config.update(
        SESSION_COOKIE_NAME="taskfinder_admin",
        SESSION_COOKIE_PATH="/admin",
        SESSION_COOKIE_SECURE=settings.session_cookie_secure,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_lifetime_s),
        REMEMBER_COOKIE_SECURE=settings.session_cookie_secure,  # never issued, but never weak either
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SAMESITE="Lax",
        WTF_CSRF_CHECK_DEFAULT=False,                     # enforce_policy calls csrf.protect() itself
        WTF_CSRF_TIME_LIMIT=settings.session_lifetime_s,  # a page stays usable as long as its session
    )
    csrf.init_app(app)
    login_manager = LoginManager()
    login_manager.session_protection = "basic"
    login_manager.user_loader(accounts.session_user)
    login_manager.init_app(app)
    # Flask-Login's after-request hook (it sets or clears the remember cookie that login_user or
    # logout_user asked for, through the session) on the admin's requests only: only they have a
    # session (AdminOnlySessionInterface) and only the admin's views log in and out. Elsewhere it
    # read an empty null session on every request: a hook call per search (issue 43 item 6).
    remember = login_manager._update_remember_cookie
    app.after_request_funcs[None].remove(remember)
    app.after_request_funcs.setdefault(ADMIN, []).append(remember)
    app.session_interface = AdminOnlySessionInterface()
    app.extensions["taskfinder_admin"] = AdminState(throttle=throttle)


def admin_state() -> AdminState:
    return current_app.extensions["taskfinder_admin"]


def accounts() -> AccountStore:
    return current_app.extensions["taskfinder"].accounts


# -- the policy ----------------------------------------------------------------------------
def is_api_request() -> bool:
    return request.blueprint == "admin.api"


def authenticate() -> tuple[Account | None, str | None]:
    """(user, how): an API request with an Authorization header is judged by that token alone
    (no fallback to the cookie); everything else by the session."""
    if is_api_request() and "Authorization" in request.headers:
        token = bearer_token(request.headers.get("Authorization"))
        user = accounts().token_user(token) if token else None
        return user, "token" if user else None
    if current_user.is_authenticated:
        return current_user._get_current_object(), "session"
    return None, None


def enforce_policy():
    """Runs before every admin view (nested api blueprint included); returning a response
    refuses the request."""
    user, how = authenticate()
    g.admin_user, g.admin_auth = user, how
    if request.endpoint not in PUBLIC_ENDPOINTS and user is None:
        return refuse_anonymous()
    if request.method in SAFE_METHODS:
        return None
    if request.endpoint not in PUBLIC_ENDPOINTS | VIEWER_WRITES and not user.can_write:
        return refuse(403, "this needs the editor role")
    if how != "token":
        try:
            csrf.protect()
        except CSRFError as exc:
            return refuse(400, f"missing or invalid CSRF token ({exc.description}); reload the page and try again")
    return None


def refuse_anonymous():
    if is_api_request():
        response = jsonify({"error": "authentication required"})
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Bearer realm="taskfinder-admin"'
        return response
    target = request.full_path.rstrip("?") if request.method == "GET" else None
    return redirect(url_for("admin.login", next=target))


def refuse(status: int, message: str):
    if is_api_request():
        return jsonify({"error": message}), status
    return render_template("admin/error.html", status=status, message=message), status


def security_headers(response):
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "admin.static":
        response.headers["Cache-Control"] = "no-store"
    return response


def template_helpers() -> dict:
    return {"admin_user": g.get("admin_user")}   # csrf_token(): CSRFProtect registers it


def safe_next(target: str | None) -> str:
    """Where to go after login: only a path inside /admin on this site (no open redirect)."""
    default = url_for("admin.dashboard")
    if not target or "\\" in target or any(ord(c) < 32 for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/admin/") or target.startswith("//"):
        return default
    return target

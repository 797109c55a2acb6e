"""The embeddable search widget and the demo homepage.

    GET /widget.js    the widget: one dependency-free script, no build step (widget/static/widget.js)
    GET /widget.css   its optional stylesheet
    GET /             the demo homepage (DEMO_HOMEPAGE, on by default): a plain page that embeds
                      the widget exactly as a host platform would, searching this app's catalog
    GET /demo/role-token?role=R   the demo's role switcher (DEMO_ROLE_SWITCHER, see widget.demo_roles)
    GET <a task's URL>   in demo mode, a stand-in page for the host platform's task screen
    any other unknown page   an HTML "page not found" (API paths keep their JSON errors: api.search)

A host page embeds it with

    <link rel="stylesheet" href="https://taskfinder.example/widget.css">
    <div id="taskfinder"></div>
    <script src="https://taskfinder.example/widget.js" data-endpoint="https://taskfinder.example/api"
            data-target="#taskfinder" defer></script>

The homepage and the assets carry a Content-Security-Policy: the homepage allows scripts, styles
and requests from this origin only (no inline script or style anywhere), so the widget is shown
to work under `script-src 'self'`.
"""
from __future__ import annotations

import logging

from flask import Blueprint, abort, after_this_request, current_app, jsonify, render_template, request, \
    send_from_directory
from flask_compress import Compress, DictCache

from lexicon.text import display_label
from api.roles import sign_role_token
from api.search import caller_access
from widget.demo_roles import EXTENSION, demo_secret, switcher_enabled, token_ttl_s

log = logging.getLogger(__name__)
widget_bp = Blueprint("widget", __name__, static_folder="static", static_url_path="/widget-static",
                      template_folder="templates")

# The demo homepage: everything from this origin, nothing inline, never framed.
HOMEPAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# The assets themselves: a script or stylesheet needs no privileges as a document.
ASSET_CSP = "default-src 'none'; frame-ancestors 'none'"
ASSET_MAX_AGE_S = 300   # short: hosts pick up a new widget within minutes of a deploy
COMPRESSION = "widget_compress"


@widget_bp.record_once
def _install_compression(state) -> None:
    """Flask-Compress (maintained; zstd, br, gzip and deflate by the client's Accept-Encoding,
    `Vary: Accept-Encoding`, ETags suffixed per encoding) for the widget's assets only: not
    registered app-wide (COMPRESS_REGISTER off), so the JSON API is never compressed on the
    request path. Each asset is compressed once per encoding and kept in memory (DictCache keyed
    by path: the files change only with a deploy, i.e. a restart); widget.js is 41 KB raw, 10 KB
    gzip, 9 KB br."""
    compress = Compress()
    config = state.app.config
    config.update(COMPRESS_REGISTER=False, COMPRESS_STREAMS=False, COMPRESS_MIN_SIZE=500,
                  COMPRESS_CACHE_BACKEND=DictCache, COMPRESS_CACHE_KEY=lambda request: request.path,
                  COMPRESS_ALGORITHM=["br", "gzip"], COMPRESS_BR_LEVEL=11, COMPRESS_LEVEL=9)
    compress.init_app(state.app)
    state.app.extensions[COMPRESSION] = compress


def _compressed(response):
    """Compress (Flask-Compress also answers a matching If-None-Match with 304); a client that
    accepts no encoding gets the file as it is, revalidated the same way."""
    response = current_app.extensions[COMPRESSION].after_request(response)
    if "Content-Encoding" not in response.headers:
        response.make_conditional(request)
    return response


def _asset(filename: str, mimetype: str):
    """A widget asset, loadable by host pages on any origin (Cross-Origin-Resource-Policy), with
    a short cache lifetime and its ETag for cheap revalidation, compressed (br or gzip) when the
    client accepts it."""
    response = send_from_directory(widget_bp.static_folder, filename, mimetype=mimetype, max_age=ASSET_MAX_AGE_S,
                                   conditional=False)
    response.direct_passthrough = False
    response.make_sequence()   # the file read into memory: a body that can be compressed (and cached)
    after_this_request(_compressed)
    response.headers["Content-Security-Policy"] = ASSET_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


@widget_bp.get("/widget.js")
def widget_js():
    return _asset("widget.js", "text/javascript")


@widget_bp.get("/widget.css")
def widget_css():
    return _asset("widget.css", "text/css")


@widget_bp.get("/favicon.ico")
def favicon():
    """The icon every admin page names (admin/static/favicon.svg), where a browser asks for one
    by itself: no 404 in its console (issue 32 item 10; tests/test_favicon_ico.py)."""
    response = send_from_directory(current_app.blueprints["admin"].static_folder, "favicon.svg",
                                   mimetype="image/svg+xml", max_age=ASSET_MAX_AGE_S)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@widget_bp.record_once
def _install_demo(state) -> None:
    """The switcher's secret (only while it is on) and the HTML page-not-found (api.search's
    404 handler calls it for a page that is not an API path)."""
    settings = state.app.config["SETTINGS"]
    if switcher_enabled(settings):
        state.app.extensions[EXTENSION] = demo_secret(settings.secret_key)
    state.app.extensions["html_not_found"] = missing_page


def _live():
    return current_app.extensions["taskfinder"].search.live()


def _page(template: str, status: int = 200, **context):
    """A demo page (no inline script or style, never framed)."""
    settings = current_app.config["SETTINGS"]
    response = current_app.make_response((render_template(template, demo=settings.demo_homepage, **context), status))
    response.headers["Content-Security-Policy"] = HOMEPAGE_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


@widget_bp.get("/")
def homepage():
    """The demo homepage; a 404 when DEMO_HOMEPAGE is off (a deployment that only serves the API
    and the widget to its host platforms). With the role switcher, it lists the catalog's roles."""
    settings = current_app.config["SETTINGS"]
    if not settings.demo_homepage:
        abort(404)
    try:
        live = _live()
    except Exception:   # no index and no database: the page still works, without examples
        log.warning("no search index for the homepage's examples", exc_info=True)
        return _page("widget/home.html", roles=[], examples=[])
    roles = []
    if switcher_enabled(settings):
        texts = [text for task in live.index.tasks for text in (task.name, *task.aliases, task.help)]
        roles = [(role, display_label(role, texts), example_searches(live, role)) for role in sorted(live.roles)]
    return _page("widget/home.html", roles=roles, examples=example_searches(live, None))


# The kinds of test case that show what the search copes with, in the order they are offered.
EXAMPLE_KINDS = ("typo", "abbreviation", "natural_language", "synonym", "multi_word")
EXAMPLE_COUNT = 3
EXAMPLE_MAX_CHARS = 40


def example_searches(live, role: str | None) -> list[str]:
    """The homepage's "Try …" searches for a viewer (`role` None: a visitor with no role):
    written test cases of the catalog (catalog/data/headstart_cases.jsonl for the demo) whose
    right tasks are all ones this viewer may see, so each example finds a right answer for
    whoever it is shown to (written cases pin their answer: serving.service). A role's own
    restricted tasks come first, to show what picking it adds; one case per kind (typo,
    abbreviation, ...), short ones only. Empty when the catalog has no such cases.
    tests/browser/test_widget_small_things.py searches every example as its viewer."""
    tasks = {task.id: task for task in live.index.tasks if task.active}

    def visible(task_id: str) -> bool:
        task = tasks.get(task_id)
        return task is not None and (not task.roles or role in task.roles)

    usable = [case for case in live.cases
              if case.gold and not case.implicit and case.category in EXAMPLE_KINDS
              and len(case.query) <= EXAMPLE_MAX_CHARS and all(visible(t) for t in case.gold)]
    own = [case for case in usable if role and any(role in tasks[t].roles for t in case.gold)]
    picked: list[str] = []
    kinds: set[str] = set()
    for pool in (own, usable):
        for kind in EXAMPLE_KINDS:
            for case in pool:
                if len(picked) < EXAMPLE_COUNT and case.category == kind and kind not in kinds \
                        and case.query not in picked:
                    picked.append(case.query)
                    kinds.add(kind)
                    break
    return picked


@widget_bp.get("/demo/role-token")
def demo_role_token():
    """{"token", "role", "expires_in"}: a role token for one role of the catalog, signed with the
    demo-only secret (widget.demo_roles); a 404 unless the switcher is on."""
    settings = current_app.config["SETTINGS"]
    secret = current_app.extensions.get(EXTENSION)
    if not switcher_enabled(settings) or not secret:
        abort(404)
    role = request.args.get("role", "")
    if role not in _live().roles:
        return jsonify({"error": "role must be one of the roles of the catalog's tasks"}), 400
    ttl = token_ttl_s(settings)
    response = jsonify({"token": sign_role_token(secret, [role], ttl), "role": role, "expires_in": ttl})
    response.headers["Cache-Control"] = "no-store"
    return response


def missing_page():
    """A page that no route serves: in demo mode, a task's URL gets a stand-in for the host's
    task screen (200); anything else an HTML 404. A restricted task's URL is a task's page only
    to a caller whose verified roles (api.roles: a role token, as a bearer token or
    `?role_token=`, or a trusted proxy's header) may see it, and to anyone else the very 404 of
    a URL that no task has: until issue 42 item 7 it answered 200 "A restricted task" with its
    category, which confirmed the task by its URL. The shown page is never stored by a cache."""
    settings = current_app.config["SETTINGS"]
    if settings.demo_homepage and request.method in ("GET", "HEAD"):
        try:
            live = _live()
        except Exception:   # no index and no database: a page-not-found is still an answer, never a 500
            log.warning("no search index to look %s up in; answering 404", request.path, exc_info=True)
            return _page("widget/not_found.html", 404, path=request.path)
        task = next((t for t in live.index.tasks if t.active and t.url == request.path), None)
        if task is not None and task.roles and not task.visible_to(caller_access(request.args).roles):
            task = None   # the same answer, byte for byte, as a URL no task has
        if task is not None:
            response = _page("widget/task.html", task=task, path=request.path,
                             category_label=live.index.category_labels.get(task.category))
            if task.roles:
                response.headers["Cache-Control"] = "private, no-store"
            return response
    return _page("widget/not_found.html", 404, path=request.path)

"""HTTP edge of the search pipeline: /api/search, health, readiness, metrics, OpenAPI spec.

Every answered /api/search gets a fresh `search_id` and is queued for the search log
(analytics.recorder writes it in the background, never on the request path).

/api/search shows restricted tasks only to verified roles (api.roles: a signed role token
or a trusted proxy's header); the `role` query parameter merely picks one of those. Each answer
says how many of the best tasks the caller's roles hide (`hidden_by_role`, a count, never which),
whether this server can re-rank at all (`rerank_available`: no LLM configured, no point in
asking rerank=1), and whole queries to offer under the search box for the same roles
(`completions`: api.completions, search.completions), so the widget asks once per keystroke.
Unknown API paths answer JSON errors; other unknown pages get the demo pages' HTML
page-not-found (widget/)."""
from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import re
from dataclasses import replace
from urllib.parse import parse_qsl

from flask import Blueprint, Response, current_app, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST

from analytics.records import SESSION_ID, search_record
from analytics.store import AnalyticsStore
from api.completions import LiveCompletions, read_popular
from api.events import EXTENSION as ANALYTICS, person_of
from catalog.models import utcnow
from api.roles import NONE, REJECTED, VERIFIED, Access, bearer_token, resolve_access
from search.suggestions import empty_state, with_completions
from serving.answer import Answer
from serving.service import BadQuery
from settings import PROJECT_ROOT
from web.clients import known_client_address

search_bp = Blueprint("search", __name__)
log = logging.getLogger(__name__)

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


COMPLETIONS = "taskfinder_completions"   # app.extensions: this app's LiveCompletions


def services():
    return current_app.extensions["taskfinder"]


@search_bp.record_once
def install_completions(state) -> None:
    """Give the app the completions its answers carry (api.completions), reading the popular
    searches from the app's own analytics tables."""
    found = state.app.extensions["taskfinder"]
    store, settings = AnalyticsStore(found.store.engine), found.settings
    state.app.extensions[COMPLETIONS] = LiveCompletions(
        lambda: read_popular(store, settings.completion_min_people, settings.completion_settle_s),
        read_exclusions=store.completion_exclusions)


def with_one_voice(answer: Answer, app=None) -> tuple[Answer, list[dict]]:
    """The answer and its completions (api.completions: those of its query for the roles it was
    answered for, its `roles`: the caller's verified roles as the search narrowed them,
    serving.service.visible_roles, in the language the search read it in, its `language`)
    speaking with one voice (search.suggestions.with_completions,
    issue 43 item 2): on a refused answer, the tasks the offered completions lead to become its
    first task chips, and a completion leading to a task a written out-of-scope case rules out is
    dropped. An answer with results, or without completions, is returned as it is (a cached
    answer keeps its encoding); only a refused one is encoded anew. One cached offer of one build
    gives both the completions listed and the tasks each leads to. `app`: the current app,
    where the caller has it at hand (a context lookup fewer)."""
    extensions = (app or current_app).extensions
    live, query = extensions["taskfinder"].search.live(), answer.body["query"]
    offer = extensions[COMPLETIONS].offer(live, query, frozenset(answer.body["roles"]), answer.body["language"])
    completions = list(offer.listed)
    if answer.body["results"] or not completions:
        return answer, completions
    leads = {c.text: c.tasks for c in offer.found}
    wanted = set().union(*leads.values())
    names = {task.id: task.name for task in live.index.tasks if task.id in wanted}
    suggestions, completions = with_completions(
        query, answer.body["suggestions"],
        [(c, [names[t] for t in leads.get(c["text"], ()) if t in names]) for c in completions], live.out_of_scope)
    body = {**answer.body, "suggestions": suggestions, "empty_state": empty_state((), suggestions)}
    return Answer(body, answer.timings_ms), completions


def bad_request(message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), 400


def query_args() -> dict[str, str]:
    """The query string's parameters, first value of each, as a plain dict: werkzeug's
    MultiDict.get raises and catches an exception for every absent name, and most of the
    optional parameters are absent from most searches. Parsed as werkzeug parses `request.args`
    (the same `parse_qsl` call: blank values kept, invalid percent-encoded bytes left encoded),
    straight into the dict: no MultiDict is built only to be copied (issue 43 item 6)."""
    pairs = parse_qsl(request.query_string.decode(), keep_blank_values=True, errors="werkzeug.url_quote")
    return dict(reversed(pairs))   # reversed: the first value of a repeated name wins, as in to_dict()


class EnvironHeaders:
    """Request headers read straight from the WSGI environ: `get` of an absent header is a dict
    miss (werkzeug's request.headers.get raises and catches an exception for it). Only headers
    that travel as HTTP_* variables (all but Content-Type and Content-Length)."""

    __slots__ = ("environ",)

    def __init__(self, environ: dict):
        self.environ = environ

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.environ.get("HTTP_" + name.upper().replace("-", "_"), default)


def parse_flag(args: dict[str, str], name: str) -> bool | None:
    raw = args.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadQuery(f"{name} must be 0 or 1, not {raw!r}")


def parse_k(args: dict[str, str], default: int = 10) -> int:
    raw = args.get("k")
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadQuery(f"k must be an integer, not {raw!r}") from None


def parse_session(args: dict[str, str]) -> str | None:
    """The caller's opaque session id (analytics), or None; BadQuery when malformed."""
    raw = args.get("session")
    if raw is None:
        return None
    if not SESSION_ID.fullmatch(raw):
        raise BadQuery("session must be 8-64 characters of A-Z, a-z, 0-9, '_' and '-'")
    return raw


#: A language tag as BCP 47 writes one (RFC 5646: a primary subtag of 2-8 letters, then subtags
#: of 1-8 letters or digits), at most 35 characters (its longest well-formed form in practice).
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")


def parse_language(args: dict[str, str]) -> str | None:
    """The language of the page the query was typed on (`lang`: a language tag, as the widget
    reads the host page's `<html lang>`), or None; BadQuery when it is no language tag. A tag of
    a language the product does not read is taken and changes nothing (serving's answer keeps
    the languages lexicon.language reads)."""
    raw = args.get("lang")
    if raw is None or raw == "":
        return None
    if len(raw) > 35 or not LANGUAGE_TAG.fullmatch(raw):
        raise BadQuery(f"lang must be a language tag such as 'es' or 'es-MX', not {raw[:40]!r}")
    return raw


def parse_shown(args: dict[str, str]) -> tuple[str, ...]:
    """The task ids on screen (`shown`: comma-separated, as the widget sends its list's ids), or ().
    Ids the live index does not rank are harmless: only a task of the new ranking is ever held."""
    raw = args.get("shown") or ""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


REJECTED_NOTE = "the role credential was not accepted; only unrestricted tasks are shown"
ROLE_IGNORED_NOTE = "'role' was ignored: it is not one of the caller's verified roles"


DEMO_ROLE_SECRET = "demo_role_secret"   # app.extensions: set by the demo's role switcher only while it is on


def caller_access(args: dict[str, str], app=None) -> Access:
    """The caller's verified roles (api.roles): a signed token or a trusted proxy's header.
    While the demo's role switcher is on (widget.demo_roles), a token that ROLE_TOKEN_SECRET
    does not verify may instead be one the switcher signed with its demo-only secret. `app`:
    the current app, where the caller has it at hand (a context lookup fewer)."""
    extensions = (app or current_app).extensions
    environ = request.environ
    settings, headers = extensions["taskfinder"].settings, EnvironHeaders(environ)
    access = resolve_access(settings, headers, args, environ.get("REMOTE_ADDR"))
    demo_secret = extensions.get(DEMO_ROLE_SECRET)
    if access.credential == REJECTED and demo_secret:
        demo = resolve_access(replace(settings, role_token_secret=demo_secret), headers, args, None)
        if demo.credential == VERIFIED:
            return demo
    return access


def access_report(access: Access, requested_role: str | None, body: dict) -> dict:
    """What the response says about access: how the roles were established and, generically,
    what was not accepted. It never says why a token failed nor which roles exist."""
    report: dict = {"credential": access.credential}
    if access.credential == REJECTED:
        report["note"] = REJECTED_NOTE
    elif requested_role is not None and body["role"] is None:
        report["note"] = ROLE_IGNORED_NOTE
    return report


@search_bp.get("/api/search")
def api_search():
    # the app once, not a context-local lookup in each helper (issue 43 item 6: about ten per search)
    app = current_app._get_current_object()
    extensions = app.extensions
    svc = extensions["taskfinder"]
    args = query_args()
    access = caller_access(args, app)
    requested_role = args.get("role") or None
    try:
        session_id = parse_session(args)
        answer = svc.search.answer(args.get("q"), k=parse_k(args), roles=access.roles, role=requested_role,
                                   rerank=parse_flag(args, "rerank"), typing=parse_flag(args, "typing"),
                                   after=args.get("after"), shown=parse_shown(args),
                                   language=parse_language(args))
    except BadQuery as exc:
        return bad_request(str(exc))
    # person_of(None) is None: no pseudonym key lookup for the anonymous majority
    record = search_record(answer.body, session_id, utcnow(), person_of(access.subject) if access.subject else None)
    extensions[ANALYTICS].record_search(record)  # queued: written in the background (analytics.recorder)
    # serving.answer: a cached answer's results are not encoded again, only these fields
    answer, completions = with_one_voice(answer, app)
    body = answer.to_json(search_id=record.id, access=access_report(access, requested_role, answer.body),
                          rerank_available=svc.search.reranker is not None, completions=completions)
    response = app.response_class(body + b"\n", mimetype="application/json")
    if access.credential != NONE:  # role-dependent: no shared cache may serve it to another caller
        response.headers["Cache-Control"] = "private, no-store"
    return response


@search_bp.get("/healthz")
def healthz():
    """Liveness: the process answers. `pid` tells which worker did (gunicorn runs several, each
    with its own index), so a probe or an operator can see every worker answer."""
    return jsonify({"status": "ok", "pid": os.getpid()})


@search_bp.get("/readyz")
def readyz():
    """Readiness of the worker that answers (`pid`): its index is built (embeddings may be
    degraded). A worker that has an index stays ready while the database is unreachable (it
    serves that index; `database` says so), so that a database restart does not take every
    worker out of a load balancer at once; without an index it is not ready."""
    svc = services()
    try:
        live = svc.search.live()
    except Exception:  # no index and no store: not ready. The exception (it may name hosts, SQL,
        # paths) goes to the log only, never into the response (issue 17 item 8).
        log.exception("readiness: the search index could not be built")
        return jsonify({"status": "unavailable", "pid": os.getpid(),
                        "error": "the search index could not be built; see the server log"}), 503
    try:
        svc.store.revision()
        database = "ok"
    except Exception:
        database = "unreachable"
    status = {"status": "ready", "pid": os.getpid(), "database": database, "revision": live.revision,
              "tasks": len(live.index.tasks),
              "test_cases": len(live.cases), "embeddings": "ok" if live.vectors_ok else "unavailable",
              "rerank": "configured" if svc.search.reranker is not None else "off"}
    if not live.index.tasks:
        return jsonify({**status, "status": "empty", "error": "the catalog has no active task"}), 503
    return jsonify(status)


@search_bp.get("/metrics")
def metrics():
    """Prometheus text format: all workers' samples in multiprocess mode (infra.metrics).
    Not public (it shows admin login outcomes, error rates): see metrics_refusal."""
    settings = services().settings
    # the client, not the peer: behind a trusted proxy on this host every peer is loopback; and
    # only a client known to be one (every forwarded hop a bare IP address: issue 42 item 5)
    client = known_client_address(request.remote_addr, request.headers.get("X-Forwarded-For"),
                                  settings.trusted_proxies)
    refusal = metrics_refusal(settings.metrics_token, request.headers.get("Authorization"), client)
    if refusal is not None:
        response = jsonify({"error": refusal})
        response.status_code = 401 if services().settings.metrics_token else 403
        if services().settings.metrics_token:
            response.headers["WWW-Authenticate"] = 'Bearer realm="taskfinder-metrics"'
        return response
    return Response(services().metrics.exposition(), mimetype=CONTENT_TYPE_LATEST)


def metrics_refusal(token: str, authorization: str | None, client: str | None) -> str | None:
    """Why a /metrics request is refused, or None. With METRICS_TOKEN set, the request must carry
    it as `Authorization: Bearer <token>` (Prometheus's `authorization` scrape setting; compared
    in constant time). Without it, only clients on this host (loopback) are answered: a scraper
    elsewhere needs the token. `client` is the address web.clients.client_address finds, so a
    request forwarded by a proxy listed in TRUSTED_PROXIES is judged by the address the proxy
    saw, never by the proxy's own loopback peer (issue 33 item 9), and a forwarded hop that is
    not a bare IP address leaves the client unknown (None: refused, issue 42 item 5: `unknown`,
    `127.0.0.1:80` or `[::1]` fell back to the proxy's loopback); behind a proxy that is NOT
    listed every client looks local, so set METRICS_TOKEN there (docs/security.md)."""
    if token:
        given = bearer_token(authorization) or ""
        if hmac.compare_digest(given.encode(), token.encode()):
            return None
        return "metrics need METRICS_TOKEN as a bearer token"
    try:
        if client and ipaddress.ip_address(client).is_loopback:
            return None
    except ValueError:
        pass
    return "metrics are served to this host only unless METRICS_TOKEN is set"


@search_bp.get("/openapi.json")
def openapi():
    return Response((PROJECT_ROOT / "openapi.json").read_text(encoding="utf-8"), mimetype="application/json")


@search_bp.before_app_request
def reject_undecodable_query_string():
    """A query string with raw bytes that are not UTF-8 (percent-encoded ones are fine) is a 400:
    Werkzeug decodes it strictly on first access to request.args, which would be a 500."""
    try:
        request.query_string.decode("utf-8")
    except UnicodeDecodeError:
        return bad_request("the query string is not valid UTF-8")
    return None


# Paths whose clients are programs: their errors are JSON. Any other unknown path gets the HTML
# page-not-found of the demo pages (widget/), which in demo mode also serves the tasks' URLs.
API_PATHS = ("/api/", "/admin/api/")
API_ENDPOINTS = frozenset({"/api", "/metrics", "/healthz", "/readyz", "/openapi.json"})


def is_api_path(path: str) -> bool:
    return path in API_ENDPOINTS or path.startswith(API_PATHS)


def wants_html() -> bool:
    """A browser's request (Accept ranks text/html above JSON), or one without an Accept header."""
    accept = request.accept_mimetypes
    return not accept or accept.best_match(["application/json", "text/html"]) == "text/html"


@search_bp.app_errorhandler(404)
def not_found(_error):
    html_page = current_app.extensions.get("html_not_found")
    if html_page is not None and not is_api_path(request.path) and wants_html():
        return html_page()
    return jsonify({"error": f"no such endpoint: {request.path}"}), 404


@search_bp.app_errorhandler(405)
def method_not_allowed(_error):
    return jsonify({"error": f"method {request.method} not allowed on {request.path}"}), 405


@search_bp.app_errorhandler(500)
def internal_error(_error):
    """Any unhandled exception: a JSON body without the exception or a stack trace (those can
    carry queries, SQL or paths; Flask has already logged them with the traceback). The request
    metrics (web.request_metrics) count it with status 500, like every other response."""
    return jsonify({"error": "internal server error"}), 500

"""Taskfinder: find the right task from a plain-language query.

    python app.py serve               # HTTP API on HOST:PORT (waitress, one process: the embedded default)
    gunicorn -c ops/gunicorn.conf.py  # production: WEB_CONCURRENCY workers (`make serve-prod`)
    python app.py search "devlopmental screning"
    python app.py users create alice --role editor   # admin accounts (cli/accounts.py)
    python app.py --help              # every command

`create_app(settings)` is the app factory; every dependency is built here (the search service and
what it is built from by serving.parts), once, and handed to the parts that need it. Importing
this module loads no Flask: create_app imports it when it builds an app, and `python app.py
search` (cli.search) never does (issue 44 item 9).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.breaker import CircuitBreaker
from serving.parts import SearchParts, build_search
from settings import Settings

if TYPE_CHECKING:
    from flask import Flask

    from admin.accounts import AccountStore
    from infra.metrics import Metrics


@dataclass(frozen=True)
class Services(SearchParts):
    """app.extensions["taskfinder"]: the search service and what it is built from (SearchParts:
    settings, store, search, metrics, cache), and the admin accounts."""
    accounts: AccountStore


def create_app(settings: Settings | None = None, *, http: bool = True) -> Flask:
    """The app: its services and, with `http` (the default), what it answers over HTTP (the
    public API, the widget, the analytics events, the admin). The command line builds it without
    them unless the command serves HTTP or reads what they set up (cli.group.TaskfinderGroup)."""
    from admin import audit
    from admin.accounts import AccountStore
    from cli import LAZY_COMMANDS
    from cli.group import LazyAppGroup, serve_command
    from cli.search import search_command
    from web.flask_app import Int32Converter, TaskfinderFlask
    from web.json_provider import OrjsonProvider

    settings = settings or Settings.from_env()
    app = TaskfinderFlask(__name__)
    app.url_map.converters["int"] = Int32Converter   # before any route: <int:...> past 32 bits is a 404
    app.config["SETTINGS"] = settings
    app.json = OrjsonProvider(app)  # the standard library's encoder costs a third of a cached answer
    app.json.sort_keys = False

    parts = build_search(settings, audit=audit.record)  # every published change writes its audit entry
    engine = parts.store.engine
    accounts = AccountStore(engine)
    app.extensions["taskfinder"] = Services(parts.settings, parts.store, parts.search, parts.metrics, parts.cache,
                                            accounts)
    if http:
        install_http(app, settings, engine, parts.metrics, accounts)
    app.cli = LazyAppGroup(app.name, lazy=LAZY_COMMANDS)   # the heavier commands imported when run
    for command in (search_command, serve_command):
        app.cli.add_command(command)
    return app


def install_http(app: Flask, settings: Settings, engine, metrics: Metrics, accounts: AccountStore) -> None:
    """Everything `app` answers over HTTP: rate limits, the public API and widget, the analytics
    events and their recorder, CORS, the admin, and the middleware around them. Imported here,
    not at the top: ~0.3 s of imports (the admin's pages alone ~0.35 s with their own
    dependencies) that a command such as `app.py search` never needs (issue 44 item 9;
    `ops/bench_cli.py`)."""
    from admin.routes import install_admin
    from admin.throttle import build_throttle
    from api.cors import install_cors
    from api.events import events_bp, init_analytics
    from api.kb import kb_bp
    from api.search import search_bp
    from web.headers import install_api_headers
    from web.limits import REDIS_COOLDOWN_S, REDIS_FAILURES, OutageReporter, build_storage, install_rate_limits
    from web.request_metrics import install_request_metrics
    from widget import widget_bp

    # Redis (REDIS_URL) for the rate limits and the login throttle: connected lazily, so a Redis
    # that is down at start is an outage like any other (web.limits), not a failed start
    redis_breaker = CircuitBreaker(REDIS_FAILURES, REDIS_COOLDOWN_S, on_change=metrics.breaker_listener("redis"))
    outage = OutageReporter("redis (rate limits, login throttle)", metrics.ratelimit_backend_errors.inc)

    install_rate_limits(app, settings, metrics, redis_breaker, outage)
    app.register_blueprint(search_bp)
    app.register_blueprint(kb_bp)
    app.register_blueprint(widget_bp)
    # the event caps' counts (analytics.budget): in Redis with REDIS_URL, behind their own breaker
    events_breaker = CircuitBreaker(REDIS_FAILURES, REDIS_COOLDOWN_S, on_change=metrics.breaker_listener("redis_events"))
    init_analytics(app, settings, engine, metrics, build_storage(
        settings, events_breaker, OutageReporter("redis (event caps)", metrics.ratelimit_backend_errors.inc)))
    app.register_blueprint(events_bp)
    install_cors(app, settings.cors_origins)
    # the /admin blueprint with its nested /admin/api and /admin/analytics (admin.blueprint, admin.routes)
    install_admin(app, settings, accounts, build_throttle(settings, build_storage(settings, redis_breaker, outage)))
    install_api_headers(app)                # WSGI middleware around the app...
    install_request_metrics(app, metrics)   # ...and the outermost: its duration covers everything inside


def main(args: list[str] | None = None) -> None:
    """`python app.py ...`. `search` runs alone (cli.search: the search service, without Flask,
    whose imports were a tenth of a one-shot search's time; issue 44 item 9); every other command
    through the Flask command line (cli.group), which builds the app the command needs."""
    args = sys.argv[1:] if args is None else args
    if args[:1] == ["search"]:
        from cli.search import search_command
        search_command.main(args[1:], prog_name="app.py search")
    else:
        from cli.group import command_line
        command_line(create_app).main(args, prog_name="app.py")


if __name__ == "__main__":
    main()

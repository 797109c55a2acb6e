"""Taskfinder: find the right task from a plain-language query.

    python app.py serve               # HTTP API on HOST:PORT (waitress, one process: the embedded default)
    gunicorn -c ops/gunicorn.conf.py  # production: WEB_CONCURRENCY workers (`make serve-prod`)
    python app.py search "devlopmental screning"
    python app.py users create alice --role editor   # admin accounts (cli/accounts.py)
    python app.py --help              # every command

`create_app(settings)` is the app factory; every dependency is built here, once, and handed
to the parts that need it.
"""
from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass
from types import FunctionType

import click
from flask import Flask, current_app
from flask.cli import FlaskGroup, ScriptInfo, with_appcontext
from sqlalchemy.exc import OperationalError, ProgrammingError
from werkzeug.routing import IntegerConverter

from admin import audit
from admin.accounts import AccountStore
from catalog.db import at_newest_migration, make_engine, schema_problem
from catalog.store import CatalogStore
from catalog.validation import MAX_ID
from cli import ACCOUNT_COMMANDS, CATALOG_COMMANDS, LAZY_COMMANDS, LazyAppGroup
from rerank import Reranker
from infra.breaker import CircuitBreaker
from infra.cache import HealingCache
from search.embeddings import build_embedder
from serving.service import BadQuery, SearchService
from settings import Settings
from web.json_provider import OrjsonProvider
from infra.metrics import Metrics

class TaskfinderFlask(Flask):
    """Flask, asking once per plain function whether a view or hook is a coroutine function.
    Flask asks `ensure_sync` before every call of a view and of each before/after-request hook
    (`inspect.iscoroutinefunction`: about half a microsecond each, five times per search; issue
    43 item 6); Flask's documentation names this method as the one to override. Functions that
    are not coroutine functions are remembered (at most SYNC_MEMO of them: the app's views and
    hooks); anything else, a coroutine function included, goes to Flask's own each time."""

    SYNC_MEMO = 1024

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._sync_functions: dict[FunctionType, bool] = {}

    def ensure_sync(self, func):
        if type(func) is FunctionType and func in self._sync_functions:
            return func
        sync = super().ensure_sync(func)
        if sync is func and type(func) is FunctionType and len(self._sync_functions) < self.SYNC_MEMO:
            self._sync_functions[func] = True
        return sync


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: CatalogStore
    accounts: AccountStore
    search: SearchService
    metrics: Metrics
    cache: HealingCache


def create_app(settings: Settings | None = None, *, http: bool = True) -> Flask:
    """The app: its services and, with `http` (the default), what it answers over HTTP (the
    public API, the widget, the analytics events, the admin). The command line builds it without
    them unless the command serves HTTP or reads what they set up (`TaskfinderGroup`)."""
    settings = settings or Settings.from_env()
    app = TaskfinderFlask(__name__)
    app.url_map.converters["int"] = Int32Converter   # before any route: <int:...> past 32 bits is a 404
    app.config["SETTINGS"] = settings
    app.json = OrjsonProvider(app)  # the standard library's encoder costs a third of a cached answer
    app.json.sort_keys = False

    engine = make_engine(settings.database)
    store = CatalogStore(engine, audit=audit.record)  # every published change writes its audit entry
    metrics = Metrics(multiprocess_dir=settings.prometheus_multiproc_dir)
    cache = HealingCache(settings.cache_dir)
    reranker = Reranker(settings, cache, breaker=metered_breaker(settings, metrics, "llm")) \
        if settings.llm_base_url else None
    embedder = build_embedder(settings, cache, metered_breaker(settings, metrics, "embeddings"),
                              metrics.embedding_observer()) if settings.embeddings_enabled else None
    enrichment = None
    if settings.catalog_enrichment:   # kb/ (its index, its LLM client: ~0.25 s of imports) only then
        from kb.enrich import catalog_enrichment
        enrichment = catalog_enrichment(settings)
    search = SearchService(settings, store, embedder, reranker, metrics, enrichment=enrichment,
                           learned_evidence=lambda: learned_evidence(engine, settings))  # read at fit time only
    accounts = AccountStore(engine)
    app.extensions["taskfinder"] = Services(settings, store, accounts, search, metrics, cache)
    if http:
        install_http(app, settings, engine, metrics, accounts)
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


def learned_evidence(engine, settings: Settings):
    """What the use of the search taught (analytics.learning.fit_inputs), read when a fit runs:
    imported then, not when the app starts (~0.1 s; issue 44 item 9)."""
    from analytics.learning import fit_inputs
    return fit_inputs(engine, settings)


def digits_at_most(limit: int) -> str:
    """A regex of the decimal numbers from 0 to `limit` (leading zeros allowed within its
    length): any shorter number, or one of its length below `limit` at its first smaller digit."""
    top = str(limit)
    branches = [rf"\d{{1,{len(top) - 1}}}"] if len(top) > 1 else []
    for i, digit in enumerate(top):
        rest = len(top) - i - 1
        if digit != "0":
            branches.append(f"{top[:i]}[0-{int(digit) - 1}]" + (rf"\d{{{rest}}}" if rest else ""))
    branches.append(top)
    return "(?:" + "|".join(branches) + ")"


class Int32Converter(IntegerConverter):
    """Werkzeug's `<int:...>` for database ids: at most MAX_ID (2**31 - 1; the id columns are
    32-bit INTEGERs on PostgreSQL), so a larger number matches no route (404) instead of reaching
    the database (`integer out of range`, a 500; issue 33). A regex bound rather than werkzeug's
    `max=`: a value refused by the converter made the matcher answer 405 with another rule's
    methods."""

    regex = digits_at_most(MAX_ID)


def metered_breaker(settings: Settings, metrics: Metrics, name: str) -> CircuitBreaker:
    """A circuit breaker from settings whose state shows in /metrics under `breaker=name`."""
    return CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s,
                          on_change=metrics.breaker_listener(name))


def require_migrated_store() -> None:
    """Stop a CLI command that reads the store, with one line saying what to run, when its
    database is not set up or not migrated (catalog.db.schema_problem): the alternative is a
    40-line SQLAlchemy traceback ending in "no such table: store_revision". A database at the
    newest migration is known in one query (catalog.db.at_newest_migration); Alembic is asked only
    otherwise."""
    engine = current_app.extensions["taskfinder"].store.engine
    if at_newest_migration(engine):
        return
    problem = schema_problem(engine)
    if problem:
        raise click.ClickException(problem)


@click.command("search")
@with_appcontext
@click.argument("query")
@click.option("-k", "--k", "k", default=10, show_default=True, help="Number of results.")
@click.option("--role", "roles", multiple=True,
              help="Also show tasks restricted to this role (repeatable); the shell is trusted.")
@click.option("--rerank/--no-rerank", default=None, help="LLM re-ranking (default: RERANK_DEFAULT).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
def search_command(query: str, k: int, roles: tuple[str, ...], rerank: bool | None, as_json: bool):
    """Search the catalog and print the ranking."""
    require_migrated_store()
    try:
        body = current_app.extensions["taskfinder"].search.search(query, k=k, roles=roles, rerank=rerank)
    except BadQuery as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(body, indent=2, ensure_ascii=False) if as_json else render_text(body))


def render_text(body: dict) -> str:
    """`app.py search`'s human-readable form of a search response."""
    lines = [f"query: {body['query']!r}" + (f"  (degraded: {', '.join(body['degraded'])})" if body["degraded"] else "")]
    for rank, row in enumerate(body["results"], start=1):
        parts = ", ".join(f"{name}={value:.2f}" for name, value in row["contributions"].items() if value)
        lines.append(f"{rank:>2}. {row['name']}  [{row['id']}]  score={row['score']:.3f}  ({parts})")
    if body["corrections"]:
        lines.append("typo corrections: " + json.dumps(body["corrections"]))
    lines.append(f"timings (ms): {json.dumps(body['timings_ms'])}")
    return "\n".join(lines)


@click.command("serve")
@with_appcontext
@click.option("--host", default=None, help="Default: HOST.")
@click.option("--port", default=None, type=int, help="Default: PORT.")
@click.option("--threads", default=8, show_default=True)
def serve_command(host: str | None, port: int | None, threads: int):
    """Serve the HTTP API with waitress in this one process (the embedded default; several
    worker processes: gunicorn -c ops/gunicorn.conf.py, see the README's Operations)."""
    from waitress import serve

    settings: Settings = current_app.config["SETTINGS"]
    host, port = host or settings.host, port or settings.port
    services = current_app.extensions["taskfinder"]
    services.search.live()  # build the index (and task embeddings) before the first request
    click.echo(f"Taskfinder serving on http://{host}:{port}  (database: "
               f"{services.store.engine.url.render_as_string(hide_password=True)})")
    # SIGTERM (a service manager's stop, `docker stop`) ends the server like Ctrl-C: the serve
    # loop unwinds and the exit handlers run, so the analytics writer flushes what it queued;
    # Python's default for SIGTERM kills the process and loses up to ANALYTICS_FLUSH_INTERVAL_S
    # of searches and events (tests/test_serving.py)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))
    # waitress drops X-Forwarded-For unless told otherwise; behind TRUSTED_PROXIES the app reads
    # it itself (web.clients.client_address believes it only from those peers)
    serve(current_app._get_current_object(), host=host, port=port, threads=threads, ident="taskfinder",
          clear_untrusted_proxy_headers=not settings.trusted_proxies)


class TaskfinderGroup(FlaskGroup):
    """Flask's command group, plus:

    * a command that meets a database not set up (or not migrated to this code's head) ends with
      one line saying what to run (catalog.db.schema_problem), never with SQLAlchemy's traceback
      ("no such table: users"; issue 44 item 8). Commands that read the store may ask first
      (`require_migrated_store`); this catches every other one;
    * the app it builds answers HTTP (`create_app(http=True)`) except for OFFLINE_COMMANDS,
      which neither serve nor read what the HTTP side sets up (the analytics recorder): `app.py
      search` starts without ~0.3 s of imports it never uses (issue 44 item 9). A command it
      does not know (`routes`, `shell`, a plugin's) gets the whole app."""

    OFFLINE_COMMANDS = frozenset({*CATALOG_COMMANDS, *ACCOUNT_COMMANDS, search_command.name,
                                  "corpus", "llm", "evaluate", "evaluate-prefixes", "fit"})
    command_name: str | None = None

    def get_command(self, ctx: click.Context, name: str):
        self.command_name = name  # before FlaskGroup loads the app to find the app's commands
        return super().get_command(ctx, name)

    def serves_http(self) -> bool:
        return self.command_name not in self.OFFLINE_COMMANDS

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (OperationalError, ProgrammingError) as exc:
            problem = self._schema_problem(ctx)
            if problem:
                raise click.ClickException(problem) from exc
            raise

    @staticmethod
    def _schema_problem(ctx: click.Context) -> str | None:
        try:
            app = ctx.ensure_object(ScriptInfo).load_app()
            return schema_problem(app.extensions["taskfinder"].store.engine)
        except Exception:  # noqa: BLE001  (no better words than the original error, then)
            return None


cli = TaskfinderGroup(create_app=lambda: create_app(http=cli.serves_http()), add_version_option=False,
                      help="Taskfinder: task discovery for enterprise platforms.")

if __name__ == "__main__":
    cli()

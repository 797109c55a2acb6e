"""The Flask command line app.py runs (`python app.py --help` lists every command), and `serve`.

    command_line(create_app)   the root group: Flask's, building the app each command needs
    LazyAppGroup               the app's own group (app.cli), its heavier commands loaded when run
    serve_command              `app.py serve`: the HTTP API in this one process (waitress)

`app.py search` does not come through here when run from the shell (app.main runs cli.search
alone, without Flask); the app's group still lists it, and runs it with the app's services.
"""
from __future__ import annotations

import signal
import sys
from typing import Callable

import click
from flask import Flask, current_app
from flask.cli import AppGroup, FlaskGroup, ScriptInfo, with_appcontext
from sqlalchemy.exc import OperationalError, ProgrammingError

from catalog.db import schema_problem
from cli import ACCOUNT_COMMANDS, CATALOG_COMMANDS, load_command
from cli.search import search_command
from settings import Settings


class LazyAppGroup(AppGroup):
    """Flask's app command group, loading the `lazy` commands (load_command) on first use: click's
    documented way ("Lazily Loading Subcommands": list_commands names them, get_command loads one)."""

    def __init__(self, *args, lazy: frozenset[str] = frozenset(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)


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
      (cli.search.require_migrated_store); this catches every other one;
    * the app it builds answers HTTP (`create_app(http=True)`) except for OFFLINE_COMMANDS,
      which neither serve nor read what the HTTP side sets up (the analytics recorder), and so
      start without ~0.3 s of imports they never use (issue 44 item 9). A command it does not
      know (`routes`, `shell`, a plugin's) gets the whole app."""

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


def command_line(create_app: Callable[..., Flask]) -> TaskfinderGroup:
    """The root command group over `create_app(http=...)` (app.py passes its app factory)."""
    group = TaskfinderGroup(create_app=lambda: create_app(http=group.serves_http()), add_version_option=False,
                            help="Taskfinder: task discovery for enterprise platforms.")
    return group

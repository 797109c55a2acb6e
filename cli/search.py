"""`app.py search`: one search from the shell, printed as a ranking or as the API's JSON.

It needs the search service only (serving.parts), never Flask: `python app.py search` runs this
command without importing the web side at all (app.main), which was a tenth of its time (issue
44 item 9; `python ops/bench_cli.py`). Under Flask's command line (`app.test_cli_runner()`, a
FlaskGroup), the same command searches with the app's own services instead.
"""
from __future__ import annotations

import json

import click

from catalog.db import at_newest_migration, schema_problem
from serving.service import BadQuery
from settings import Settings


@click.command("search")
@click.argument("query")
@click.option("-k", "--k", "k", default=10, show_default=True, help="Number of results.")
@click.option("--role", "roles", multiple=True,
              help="Also show tasks restricted to this role (repeatable); the shell is trusted.")
@click.option("--rerank/--no-rerank", default=None, help="LLM re-ranking (default: RERANK_DEFAULT).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
@click.pass_context
def search_command(ctx: click.Context, query: str, k: int, roles: tuple[str, ...], rerank: bool | None,
                   as_json: bool):
    """Search the catalog and print the ranking."""
    parts = search_parts(ctx)
    require_migrated_store(parts.store.engine)
    try:
        body = parts.search.search(query, k=k, roles=roles, rerank=rerank)
    except BadQuery as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(body, indent=2, ensure_ascii=False) if as_json else render_text(body))


def search_parts(ctx: click.Context):
    """What the command searches with: under Flask's command line, whose context object is a
    flask.cli.ScriptInfo (it has `load_app`), the app's own services (app.Services); run alone
    (app.main), the search service built from the environment's settings."""
    script_info = ctx.find_root().obj
    if hasattr(script_info, "load_app"):
        return script_info.load_app().extensions["taskfinder"]
    from serving.parts import build_search
    return build_search(Settings.from_env())


def require_migrated_store(engine) -> None:
    """Stop with one line saying what to run when the database is not set up or not migrated
    (catalog.db.schema_problem): the alternative is a 40-line SQLAlchemy traceback ending in
    "no such table: store_revision". A database at the newest migration is known in one query
    (catalog.db.at_newest_migration); Alembic is asked only otherwise."""
    if at_newest_migration(engine):
        return
    problem = schema_problem(engine)
    if problem:
        raise click.ClickException(problem)


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

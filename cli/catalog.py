"""`python app.py import-catalog|import-cases|export-catalog|export-cases|load-demo` and
`db upgrade|downgrade`: the commands that drive the catalog store (import/export, migrations,
demo data)."""
from __future__ import annotations

from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup, with_appcontext

from admin.audit import cli_actor
from catalog import db
from catalog.formats import ImportRejected, load_cases_file, load_tasks_file, write_catalog, write_jsonl
from catalog.demo import DEMO_CASES, DEMO_CATALOG, DEMO_FIT, DEMO_VECTORS
from catalog.store import StoreConflict


def _store():
    return current_app.extensions["taskfinder"].store


def _fail_on(exc: Exception):
    raise click.ClickException(str(exc)) from exc


@click.command("import-catalog")
@with_appcontext
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Delete tasks that are not in the file.")
def import_catalog(path: Path, replace: bool):
    """Import tasks from JSON Lines or CSV (all-or-nothing)."""
    try:
        report = _store().import_tasks(load_tasks_file(path), replace=replace, actor=cli_actor(),
                                       message=f"import-catalog {path.name}")
    except (ImportRejected, StoreConflict) as exc:
        _fail_on(exc)
    click.echo(f"{path}: {report}")


@click.command("import-cases")
@with_appcontext
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Delete test cases that are not in the file.")
def import_cases(path: Path, replace: bool):
    """Import developer test cases from JSON Lines (all-or-nothing)."""
    store = _store()
    try:
        known = {t.id for t in store.tasks(include_inactive=True)}
        report = store.import_cases(load_cases_file(path, known), replace=replace, actor=cli_actor(),
                                    message=f"import-cases {path.name}")
    except ImportRejected as exc:
        _fail_on(exc)
    click.echo(f"{path}: {report}")


@click.command("export-catalog")
@with_appcontext
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def export_catalog(path: Path):
    """Export all tasks (JSON Lines, or CSV when PATH ends in .csv)."""
    count = write_catalog(path, _store().tasks(include_inactive=True))
    click.echo(f"wrote {count} tasks to {path}")


@click.command("export-cases")
@with_appcontext
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def export_cases(path: Path):
    """Export all test cases as JSON Lines."""
    count = write_jsonl(path, (c.to_row() for c in _store().cases()))
    click.echo(f"wrote {count} test cases to {path}")


db_group = AppGroup("db", help="Database migrations (the database named by DATABASE_URL).")


@db_group.command("upgrade")
@click.option("--revision", default="head", show_default=True)
def db_upgrade(revision: str):
    db.upgrade(_store().engine, revision)
    click.echo(f"database at {revision}: {_store().engine.url.render_as_string(hide_password=True)}")


@db_group.command("downgrade")
@click.option("--revision", default="base", show_default=True)
def db_downgrade(revision: str):
    db.downgrade(_store().engine, revision)
    click.echo(f"database at {revision}")


@click.command("load-demo")
@with_appcontext
@click.option("--force", is_flag=True, help="Import even if the catalog already has tasks.")
@click.option("--no-fit", is_flag=True, help="Do not fit the ranker now (a server then fits in the background).")
def load_demo(force: bool, no_fit: bool):
    """Migrate, load the bundled Head Start catalog and test cases if the store is empty, and fit
    the ranker on them, so that a server started afterwards answers with its final ranking from
    the first search (without the fit, the background fit of the first start lands ~20 s later
    and the same query's ranking changes under the visitor's eyes)."""
    store = _store()
    db.upgrade(store.engine)
    if store.tasks(include_inactive=True) and not force:
        click.echo("catalog already loaded; use --force to re-import the demo data")
    else:
        tasks = load_tasks_file(DEMO_CATALOG)
        click.echo(f"catalog: {store.import_tasks(tasks, actor=cli_actor(), message='demo catalog')}")
        cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
        click.echo(f"test cases: {store.import_cases(cases, actor=cli_actor(), message='demo test cases')}")
    services = current_app.extensions["taskfinder"]
    if not no_fit and services.settings.ranker_fit:
        # The demo's fit ships with it (search.shipped): installed in a second where it applies
        # (these very tasks and cases, the settings it was made with), else the same fit
        # `python app.py fit` makes (cli.fit); "up to date" when one exists for these cases.
        from search.shipped import ShippedFit, install   # when it runs: ~0.5 s that `app.py search` never needs
        report = install(ShippedFit.load(DEMO_FIT, DEMO_VECTORS), store, services.settings, services.search.embedder)
        if report["status"] == "installed":
            click.echo(f"ranker fit: installed the demo's shipped fit (fit {report['fit_id']}; "
                       f"{report['vectors']} vectors cached)")
            return
        if report["status"] != "up to date":
            click.echo(f"shipped demo fit not used: {report['status']}; fitting now")
        report = services.search.refit_now()
        click.echo(f"ranker fit: {report.get('status')}" + (f" (fit {report['fit_id']})" if report.get("fit_id") else ""))


COMMANDS = (import_catalog, import_cases, export_catalog, export_cases, db_group, load_demo)

"""Engine creation and Alembic migrations for the database named by DATABASE_URL."""
from __future__ import annotations

from pathlib import Path

import orjson
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import SQLAlchemyError

from settings import PROJECT_ROOT


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite gets its directory created and foreign keys/WAL switched on."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=True, json_serializer=json_column_text)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()
    return engine


def json_column_text(value) -> str:
    """The text stored in a JSON column: compact orjson (the analytics writer stores two JSON
    lists per logged search, and the standard library's encoder was a third of its time)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


# Alembic is imported where a migration is run or checked, not at the top: it is ~0.1 s of imports
# that a search from the command line never needs (issue 44 item 9).

def alembic_config(url: str):
    from alembic.config import Config
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run Alembic migrations up to `revision` on `engine`'s database. A database already at the
    newest migration is left as it is without loading Alembic's scripts: one query, 0.07 ms on
    SQLite and 0.35 ms on PostgreSQL, where Alembic's own no-op upgrade, which compiles every
    migration file (18 then), took 5.9 and 6.7 ms (`python ops/bench_store_import.py`); every server start
    and command runs it, and the test suite ~430 times."""
    if revision == "head" and at_newest_migration(engine):
        return
    from alembic import command
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def newest_migration() -> str:
    """The revision of the newest migration file: files are named `<revision>_<slug>.py` with
    zero-padded numbers in one line of history (tests/test_first_steps.py holds this equal to
    Alembic's head), so the largest name is the head."""
    return max(path.name.split("_", 1)[0] for path in (PROJECT_ROOT / "migrations" / "versions").glob("[0-9]*_*.py"))


def at_newest_migration(engine: Engine) -> bool:
    """Whether the database is at `newest_migration()`: one query and no Alembic import, the
    fast yes a command asks before every run (~0.1 s less than `schema_problem` for `app.py
    search`; issue 44 item 9). False (not set up, behind, ahead, unreachable) leaves the words to
    `schema_problem`."""
    try:
        with engine.connect() as connection:
            current = [row[0] for row in connection.exec_driver_sql("SELECT version_num FROM alembic_version")]
    except SQLAlchemyError:
        return False
    return current == [newest_migration()]


def schema_problem(engine: Engine) -> str | None:
    """Why `engine`'s database cannot serve this code yet, in words for the person at the shell,
    or None when it is migrated to head. CLI commands that read the store ask first (app.py's
    `cli.search.require_migrated_store`), so that a database never set up says what to run instead of
    failing with SQLAlchemy's "no such table" traceback."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    where = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as connection:
            current = set(MigrationContext.configure(connection).get_current_heads())
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return f"cannot open the database {where}: {reason}"
    scripts = ScriptDirectory.from_config(alembic_config(where))
    heads = set(scripts.get_heads())
    known = {script.revision for script in scripts.walk_revisions()}
    if not current:
        return (f"the database {where} has not been set up: run `make run` or "
                f"`python app.py load-demo` first (or `python app.py db upgrade` for an empty catalog)")
    if not current <= known:
        return (f"the database {where} is at migration {', '.join(sorted(current))}, newer than this "
                f"code knows: run the code that migrated it")
    if current != heads:
        return (f"the database {where} is at migration {', '.join(sorted(current))}, not this code's "
                f"{', '.join(sorted(heads))}: run `python app.py db upgrade` first")
    return None


def is_blank(engine: Engine) -> bool:
    """Whether `engine`'s database has no tables at all (never set up): a first step such as
    `app.py users create` may then set it up itself, as `load-demo` does."""
    try:
        return not inspect(engine).get_table_names()
    except SQLAlchemyError:
        return False

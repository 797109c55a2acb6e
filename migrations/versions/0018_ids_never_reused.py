"""Ids are never given to another record (issue 44 item 1): SQLite tables with AUTOINCREMENT.

Without AUTOINCREMENT SQLite hands out the highest rowid + 1, so deleting the newest test case
(a revert of the version that created it can) gave its id, and with it its version history, to the
next case. This rebuilds, on SQLite, every table whose ids the version history or the audit log
name, keeping the rows, and starts each table's sqlite_sequence at the highest id its rows or the
history name (a case deleted before this upgrade keeps its id to itself too). PostgreSQL's
sequences never hand out an id twice: nothing to do there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# users before api_tokens: dropping the old users table cascades to its tokens (ON DELETE CASCADE
# with foreign keys on, which cannot be switched off inside the migration's transaction), so the
# tokens are kept aside and put back
TABLES = ("test_cases", "catalog_versions", "ranker_fits", "users", "api_tokens", "audit_log", "evaluation_runs")


def _highest_named(bind) -> dict[str, int]:
    """The highest id of each table that the history names, rows deleted since included."""
    highest = {table: bind.execute(sa.text(f"SELECT coalesce(max(id), 0) FROM {table}")).scalar() or 0
               for table in TABLES}
    for (changes,) in bind.execute(sa.text("SELECT changes FROM catalog_versions")):
        for change in (json.loads(changes) if isinstance(changes, str) else changes) or ():
            key = str(change.get("key", ""))
            if change.get("kind") == "case" and key.isdigit():
                highest["test_cases"] = max(highest["test_cases"], int(key))
    for (target,) in bind.execute(sa.text("SELECT target FROM audit_log WHERE target LIKE 'token:%'")):
        number = target.removeprefix("token:")
        if number.isdigit():
            highest["api_tokens"] = max(highest["api_tokens"], int(number))
    return highest


def _rebuild(autoincrement: bool) -> None:
    bind = op.get_bind()
    highest = _highest_named(bind) if autoincrement else {}
    bind.execute(sa.text("CREATE TEMP TABLE _kept_api_tokens AS SELECT * FROM api_tokens"))
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass
    bind.execute(sa.text("DELETE FROM api_tokens"))
    bind.execute(sa.text("INSERT INTO api_tokens SELECT * FROM _kept_api_tokens"))
    bind.execute(sa.text("DROP TABLE _kept_api_tokens"))
    for table, top in highest.items():
        bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :name"), {"name": table})
        bind.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:name, :seq)"),
                     {"name": table, "seq": top})


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(autoincrement=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(autoincrement=False)

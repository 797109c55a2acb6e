"""A record's id is never given to another record (issue 44 item 1), on SQLite and PostgreSQL.

Reverting the version that created case #259 deleted it, and the next new case was given #259
(SQLite reuses the highest rowid of a table without AUTOINCREMENT) and with it the other case's
history. Every table whose ids appear in the version history or the audit log hands out ids that
only ever grow: AUTOINCREMENT on SQLite (migration 0018 rebuilds the tables of an existing
database, keeping their rows and the highest id the history names), sequences on PostgreSQL.
"""
from __future__ import annotations

import sqlite3

from sqlalchemy import text

from catalog import db
from catalog.records import CaseRecord
from catalog.store import CatalogStore

TABLES_WITH_HISTORY = ("test_cases", "catalog_versions", "ranker_fits", "users", "api_tokens", "audit_log",
                       "evaluation_runs")


def test_a_deleted_case_id_is_not_given_to_the_next_case(store):
    first = store.add_case(CaseRecord("medical exam due", (), "", None))
    store.delete_case(first.id, first.version)
    second = store.add_case(CaseRecord("need a substitute teacher today", (), "", None))
    assert second.id > first.id


def test_reverting_a_created_case_does_not_free_its_id(store):
    store.add_case(CaseRecord("an older case", (), "", None))
    created = store.add_case(CaseRecord("medical exam due", (), "", None))
    created_in = store.versions(limit=1)[0].id
    store.revert(created_in)
    assert all(case.id != created.id for case in store.cases())
    newer = store.add_case(CaseRecord("need a substitute teacher today", (), "", None))
    assert newer.id > created.id
    # the version that created the reverted case names it, not the newcomer
    assert {c.key for c in store.version(created_in).changes} == {str(created.id)}
    assert str(newer.id) not in {c.key for v in store.versions(limit=100) if v.id <= created_in + 1
                                 for c in v.changes}


def test_every_table_with_history_hands_out_ever_growing_ids(engine):
    """The schema itself, whatever code writes to it: insert, delete the newest row, insert again."""
    with engine.begin() as connection:
        for table in ("test_cases", "catalog_versions", "audit_log"):
            rows = {
                "test_cases": ("(query, gold, rationale, created_at, updated_at, version)",
                               "(:tag, '[]', '', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"),
                "catalog_versions": ("(at, actor, kind, message, store_revision, changes)",
                                     "(CURRENT_TIMESTAMP, :tag, 'x', '', 0, '[]')"),
                "audit_log": ("(at, actor, action, target)", "(CURRENT_TIMESTAMP, :tag, 'x', 'x')"),
            }[table]
            insert = text(f"INSERT INTO {table} {rows[0]} VALUES {rows[1]}")
            connection.execute(insert, {"tag": "one"})
            first = connection.execute(text(f"SELECT max(id) FROM {table}")).scalar()
            connection.execute(text(f"DELETE FROM {table} WHERE id = :id"), {"id": first})
            connection.execute(insert, {"tag": "two"})
            second = connection.execute(text(f"SELECT max(id) FROM {table}")).scalar()
            assert second > first, table
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            schema = dict(connection.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")).all())
        assert [t for t in TABLES_WITH_HISTORY if "AUTOINCREMENT" not in schema[t].upper()] == []


def test_the_admin_json_api_never_reuses_a_case_id(admin_app):
    accounts = admin_app.extensions["taskfinder"].accounts
    _, token = accounts.create_token("eddie", actor="cli:test", label="ids")
    client, editor = admin_app.test_client(), {"Authorization": f"Bearer {token}"}
    body = {"query": "ids are never reused here", "gold": [], "rationale": "", "category": "synonym"}
    first = client.post("/admin/api/cases", headers=editor, json=body)
    assert first.status_code == 201, first.get_json()
    case = first.get_json()
    deleted = client.delete(f"/admin/api/cases/{case['id']}?version={case['version']}", headers=editor)
    assert deleted.status_code == 200, deleted.get_json()
    second = client.post("/admin/api/cases", headers=editor, json={**body, "query": "a different case now"})
    assert second.status_code == 201, second.get_json()
    assert second.get_json()["id"] > case["id"]
    client.delete(f"/admin/api/cases/{second.get_json()['id']}?version=1", headers=editor)


def test_the_migration_keeps_the_rows_and_the_highest_id_the_history_names(tmp_path):
    """An SQLite database made before migration 0018: its rows (and the API tokens of its users,
    whose foreign key cascades) survive the rebuild, and a case id deleted before the upgrade,
    named only by the version history now, is not given out again."""
    path = tmp_path / "old.db"
    engine = db.make_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    store = CatalogStore(engine)   # the store writes the newest schema: the history is made there,
    kept = store.add_case(CaseRecord("kept case", (), "", None))
    gone = store.add_case(CaseRecord("deleted before the upgrade", (), "", None))
    store.delete_case(gone.id, gone.version)
    db.downgrade(engine, "0017")   # then the database is taken back to before 0018, rows kept
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO users (name, password_hash, role, active, auth_epoch, created_at, "
                                "updated_at) VALUES ('alice', 'x', 'editor', 1, 1, CURRENT_TIMESTAMP, "
                                "CURRENT_TIMESTAMP)"))
        connection.execute(text("INSERT INTO api_tokens (user_id, label, token_hash, created_at) "
                                "SELECT id, 'automation', 'h', CURRENT_TIMESTAMP FROM users"))
    versions_before = store.version_count()
    db.upgrade(engine)
    engine.dispose()

    raw = sqlite3.connect(path)
    assert raw.execute("SELECT id, query FROM test_cases").fetchall() == [(kept.id, "kept case")]
    assert raw.execute("SELECT label FROM api_tokens").fetchall() == [("automation",)]
    assert raw.execute("SELECT count(*) FROM catalog_versions").fetchone() == (versions_before,)
    assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
    raw.close()

    engine = db.make_engine(f"sqlite:///{path}")
    newer = CatalogStore(engine).add_case(CaseRecord("created after the upgrade", (), "", None))
    assert newer.id > gone.id
    engine.dispose()

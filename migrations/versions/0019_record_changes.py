"""Which records each catalog version changed (catalog.models.RecordChange), filled from the
versions already published.

A test case's page listed the versions that touched it among the newest 200 only: past 200 later
versions its history read "none recorded". And adding or importing a task read every version
ever published to find the counter its id had reached (a revert or rollback may have deleted a
task of that id): adding one took 2.6 ms on the demo just imported, 17.3 ms after 1,000 case
edits, 44.5 ms after 20 re-imports (SQLite; 1.6-1.7 ms in all three since:
`python ops/bench_store_import.py`). Both now read this index.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-30
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "record_changes",
        sa.Column("version_id", sa.Integer(), sa.ForeignKey("catalog_versions.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("key", sa.Text(), primary_key=True),
    )
    op.create_index("ix_record_changes_record", "record_changes", ["kind", "key"])
    bind = op.get_bind()
    rows = []
    for version_id, changes in bind.execute(sa.text("SELECT id, changes FROM catalog_versions ORDER BY id")):
        changes = (json.loads(changes) if isinstance(changes, str) else changes) or ()
        named = {(str(change["kind"]), str(change["key"])) for change in changes}
        rows += [{"version_id": version_id, "kind": kind, "key": key} for kind, key in sorted(named)]
    if rows:
        bind.execute(sa.text("INSERT INTO record_changes (version_id, kind, key) VALUES (:version_id, :kind, :key)"),
                     rows)


def downgrade() -> None:
    op.drop_index("ix_record_changes_record", "record_changes")
    op.drop_table("record_changes")

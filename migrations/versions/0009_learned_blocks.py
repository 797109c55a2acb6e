"""Learned-evidence blocks: (normalised query, task) pairs an admin has stopped from counting
as learned evidence. A block is a versioned catalog edit (catalog.versions, kind "block"),
written with its catalog version and audit entry in one transaction, and rolled back like any
edit; the fit's I/O edge reads the set (catalog.store.learned_blocks) and drops those pairs.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "learned_blocks",
        sa.Column("query", sa.String(500), primary_key=True),
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_learned_blocks_task_id", "learned_blocks", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_learned_blocks_task_id", "learned_blocks")
    op.drop_table("learned_blocks")

"""Catalog/lexicon versions: one row per published change (edit, import, rollback) with its
per-record changeset, written in the same transaction as the change (catalog.versions).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_versions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("message", sa.String(500), nullable=False),
        sa.Column("store_revision", sa.Integer(), nullable=False),
        sa.Column("rollback_of", sa.Integer(), nullable=True),
        sa.Column("changes", sa.JSON(), nullable=False),
    )
    op.create_index("ix_catalog_versions_at", "catalog_versions", ["at"])


def downgrade() -> None:
    op.drop_index("ix_catalog_versions_at", "catalog_versions")
    op.drop_table("catalog_versions")

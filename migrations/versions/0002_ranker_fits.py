"""Per-catalog ranker fits (fusion weights, shortlist depth, abstention fitted by CV); the
store revision row seeded.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ranker_fits",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("store_revision", sa.Integer(), nullable=False, index=True),
        sa.Column("cases_digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
    )
    # Seed the store's revision row, so that two first writes cannot race to insert it.
    op.execute("INSERT INTO store_revision (name, revision) SELECT 'catalog', 0 "
               "WHERE NOT EXISTS (SELECT 1 FROM store_revision WHERE name = 'catalog')")


def downgrade() -> None:
    op.drop_table("ranker_fits")

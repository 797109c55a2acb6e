"""Completions' exclusion list (issue 42): whole suggestions and words an admin blocked from being
offered under the search box (analytics.completion_models; admin.completions).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "completion_blocks",
        sa.Column("key", sa.String(500), primary_key=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "completion_blocked_words",
        sa.Column("word", sa.String(64), primary_key=True),
        sa.Column("created_by", sa.String(128), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("completion_blocked_words")
    op.drop_table("completion_blocks")

"""Tasks, test cases and the store revision counter.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("help", sa.Text(), nullable=False),
        sa.Column("category", sa.String(64), nullable=True),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("url", sa.String(500), nullable=True),
        sa.Column("roles", sa.JSON(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_tasks_category", "tasks", ["category"])
    op.create_table(
        "test_cases",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("query", sa.String(500), nullable=False, unique=True),
        sa.Column("gold", sa.JSON(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("category", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_test_cases_category", "test_cases", ["category"])
    op.create_table(
        "store_revision",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("revision", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("store_revision")
    op.drop_index("ix_test_cases_category", "test_cases")
    op.drop_table("test_cases")
    op.drop_index("ix_tasks_category", "tasks")
    op.drop_table("tasks")

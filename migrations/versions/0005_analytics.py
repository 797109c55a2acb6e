"""Search analytics: the search log and the widget's events (no personal data beyond an opaque
session id; purged after ANALYTICS_RETENTION_DAYS).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "search_log",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("rerank", sa.Boolean(), nullable=False),
        sa.Column("result_ids", sa.JSON(), nullable=False),
        sa.Column("no_confident_match", sa.Boolean(), nullable=False),
        sa.Column("degraded", sa.JSON(), nullable=False),
    )
    op.create_index("ix_search_log_at", "search_log", ["at"])
    op.create_index("ix_search_log_session_at", "search_log", ["session_id", "at"])
    op.create_table(
        "search_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("search_id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("task_id", sa.String(128), nullable=True),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("dwell_ms", sa.Integer(), nullable=True),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("task_ids", sa.JSON(), nullable=True),
        sa.CheckConstraint("type IN ('impression', 'click', 'dwell', 'return')", name="ck_search_events_type"),
    )
    op.create_index("ix_search_events_at", "search_events", ["at"])
    op.create_index("ix_search_events_search_id", "search_events", ["search_id"])


def downgrade() -> None:
    op.drop_index("ix_search_events_search_id", "search_events")
    op.drop_index("ix_search_events_at", "search_events")
    op.drop_table("search_events")
    op.drop_index("ix_search_log_session_at", "search_log")
    op.drop_index("ix_search_log_at", "search_log")
    op.drop_table("search_log")

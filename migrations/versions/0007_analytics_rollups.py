"""Daily roll-ups of search analytics: the analytics page reads these (one row per day, per day
and query, per day, query and task), never the raw search log (issue 17 item 6). Aggregates
only: no session ids.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

MEASURES = ("searches", "no_result", "clicked", "clicks", "click_position_sum", "abandoned", "reformulated")


def _measures() -> list[sa.Column]:
    return [sa.Column(name, sa.Integer(), nullable=False, server_default="0") for name in MEASURES]


def upgrade() -> None:
    op.create_table(
        "analytics_days",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("requests", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("sessionless_requests", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("unmatched_events", sa.Integer(), nullable=False, server_default="0"),
        *_measures(),
        sa.Column("rolled_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "analytics_query_days",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("query", sa.Text(), primary_key=True),
        *_measures(),
    )
    op.create_table(
        "analytics_task_days",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("query", sa.Text(), primary_key=True),
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("clicks", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("followups", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("analytics_task_days")
    op.drop_table("analytics_query_days")
    op.drop_table("analytics_days")

"""Learning from use (issue 16): click evidence aggregated per (normalised query, task).

`learned_evidence` holds aggregates only (no session id, no address, no per-person row), so it
survives the raw log's retention purge. `learning_state` keeps the aggregation's watermark: the
time up to which the search log and events have been folded into the aggregates.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "learned_evidence",
        sa.Column("query", sa.Text(), primary_key=True),
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column("sessions", sa.Integer(), nullable=False),
        sa.Column("clicks", sa.Integer(), nullable=False),
        sa.Column("examinations", sa.Float(), nullable=False),
        sa.Column("relevance", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decayed_clicks", sa.Float(), nullable=False, server_default="0"),
        sa.Column("decayed_sessions", sa.Float(), nullable=False, server_default="0"),
        sa.CheckConstraint("relevance >= 0 AND relevance <= 1", name="ck_learned_evidence_relevance"),
    )
    op.create_index("ix_learned_evidence_task_id", "learned_evidence", ["task_id"])
    op.create_table(
        "learning_state",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("learning_state")
    op.drop_index("ix_learned_evidence_task_id", "learned_evidence")
    op.drop_table("learned_evidence")

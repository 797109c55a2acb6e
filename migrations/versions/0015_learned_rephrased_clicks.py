"""Learning from use: how many of a pair's counted clicks came through a reformulation chain.

`learned_evidence.rephrased_clicks`: of `clicks` (one per session and window), those made on a
later search of the same session that rephrased this query (analytics.learning.chain_votes:
the query showed nothing right, the person rephrased it and clicked the task there). The editor
shows it beside the clicks, so that an admin sees which evidence is inferred. Rows aggregated
before this revision start at 0.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("rephrased_clicks", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.drop_column("rephrased_clicks")

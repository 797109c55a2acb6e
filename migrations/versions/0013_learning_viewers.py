"""Learning from use: who was shown a query's results, so that queries nobody clicks become
negative evidence for the abstention (analytics.learning.unclicked_queries).

`learned_evidence.viewers` / `.viewer_sketch`: the distinct sessions that were shown the task
for the query (an impression bound to its search, clicked or not); `.viewer_networks` /
`.viewer_network_sketch`: their distinct networks. Linear-counting sketches as in migration
0011 (no session id stored). A query's viewers are the union of its rows' sketches. Rows
aggregated before this revision start with none.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("viewers", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("viewer_networks", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("viewer_sketch", sa.LargeBinary(64), nullable=True))
        batch.add_column(sa.Column("viewer_network_sketch", sa.LargeBinary(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        for column in ("viewer_network_sketch", "viewer_sketch", "viewer_networks", "viewers"):
            batch.drop_column(column)

"""Learning from use: distinct networks as well as distinct sessions (issue 16 item 3).

`search_events.network`: a keyed, daily-rotated pseudonym of the sender's network (a /24 or
/48), never the address (analytics.sources.network_pseudonym); in the raw log only, so the
retention purge deletes it. `learned_evidence.networks`: how many distinct such networks
clicked the pair (a count, no pseudonym); rows aggregated before this revision start at 0 and
must earn their support again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("search_events") as batch:
        batch.add_column(sa.Column("network", sa.String(32), nullable=True))
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("networks", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.drop_column("networks")
    with op.batch_alter_table("search_events") as batch:
        batch.drop_column("network")

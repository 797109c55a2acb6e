"""Learning from use: sessions and networks counted distinct across aggregation windows (issue 16 item 3).

`learned_evidence.sessions` and `.networks` were each window's distinct count, summed over
windows: one session (or one network) clicking a pair once per aggregation window counted once
per window, so one person, fit after fit, could make a pair count. Each row now keeps a
linear-counting sketch of its clicking sessions and one of their networks (64 bytes each,
search.learned.sketch_of: a bit per 1/512 of all keys, no session id or pseudonym stored), and
the counts are the sketches' distinct estimates. Rows aggregated before this revision have NULL
sketches; the next aggregation that touches one counts its old totals as that many distinct
anonymous keys (analytics.learning.legacy_sketch).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("session_sketch", sa.LargeBinary(64), nullable=True))
        batch.add_column(sa.Column("network_sketch", sa.LargeBinary(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.drop_column("network_sketch")
        batch.drop_column("session_sketch")

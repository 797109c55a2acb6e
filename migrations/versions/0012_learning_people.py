"""Learning from use: distinct verified people, so that staff behind one address can learn.

`search_log.person`: where the host verified who searched (a role token's `sub`, or the trusted
proxy's user header), an 8-bit keyed pseudonym of that person (analytics.sources.person_pseudonym:
2 hex characters, 256 values in all); in the raw log only, so the retention purge deletes it.
`learned_evidence.people` and `.people_sketch`: how many distinct such people clicked the pair,
and the linear-counting sketch behind that count (as for sessions and networks, migration 0011).
Rows aggregated before this revision start at 0 people and count their networks as before.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("search_log") as batch:
        batch.add_column(sa.Column("person", sa.String(8), nullable=True))
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("people", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("people_sketch", sa.LargeBinary(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.drop_column("people_sketch")
        batch.drop_column("people")
    with op.batch_alter_table("search_log") as batch:
        batch.drop_column("person")

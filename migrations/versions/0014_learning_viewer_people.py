"""Learning from use: the distinct verified people shown a query's results, so that staff behind
one office address can teach the abstention which queries nobody clicks, as they already teach
the ranking which tasks they click (migration 0012).

`learned_evidence.viewer_people` / `.viewer_people_sketch`: the distinct verified people (a role
token's `sub`, or the trusted proxy's user header; analytics.sources.person_pseudonym) whose
settled search showed the task for the query, clicked or not. A linear-counting sketch as in
migration 0011 (no pseudonym stored). A query's viewing people are the union of its rows'
sketches. Rows aggregated before this revision start with none.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.add_column(sa.Column("viewer_people", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("viewer_people_sketch", sa.LargeBinary(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learned_evidence") as batch:
        batch.drop_column("viewer_people_sketch")
        batch.drop_column("viewer_people")

"""Learning from use: the clicking networks' sketch grows from 512 to 4096 bits.

`learned_evidence.network_sketch` (search.learned.NETWORK_SKETCH_BITS). The share and cap rules
judge each of the 512 bits as before; a network over them was discounted by its bit in every
pair, so an honest network sharing that bit lost its voucher (2-8 of ~470 honest pairs beside a
2-12 network attack, issue 33). The finer bits say which network made a bit heavy
(search.learned.heavy_within). New rows are written with 4096 bits; rows aggregated before keep
512, and a wider sketch folds to 512 bits exactly (h mod 4096 mod 512 = h mod 512:
search.learned.fold_sketch), so they merge and are judged as before. Only the column's declared
length changes: PostgreSQL's bytea and SQLite's BLOB enforce none, so SQLite's table is left as
it is.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("learned_evidence", "network_sketch", existing_type=sa.LargeBinary(64),
                        type_=sa.LargeBinary(512), existing_nullable=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column("learned_evidence", "network_sketch", existing_type=sa.LargeBinary(512),
                        type_=sa.LargeBinary(64), existing_nullable=True)

"""Placeholder revision, reserved so that parallel work can add tables without forking the chain.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""
revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

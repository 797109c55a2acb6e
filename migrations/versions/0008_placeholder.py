"""Placeholder revision, reserved so that parallel work can add tables without forking the chain.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""
revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass

"""SQLAlchemy models of the admin side: accounts, API tokens, the audit log (migration 0003).

They share `catalog.models.Base`, so one metadata describes the whole schema. Secrets are never
stored: passwords as argon2id hashes, API tokens as SHA-256 digests (a token is 256 random bits,
so a fast hash is enough, and it lets a request find its token by an indexed lookup).
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from catalog.models import Base, utcnow


class User(Base):
    """An admin account. `auth_epoch` is bumped whenever access must end now (role change,
    disable, new password): sessions carry the epoch they were opened under, and a mismatch
    logs them out, even though Flask's session cookie lives on the client."""

    __tablename__ = "users"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    password_hash: Mapped[str] = mapped_column(String(255), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    auth_epoch: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 onupdate=utcnow, nullable=False)


class ApiToken(Base):
    """A bearer token for automation, acting as its user (and with its user's role)."""

    __tablename__ = "api_tokens"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True)
    label: Mapped[str] = mapped_column(String(100), nullable=False, default="")
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class AuditEntry(Base):
    """Who did what to what, when, with the state before and after (JSON, secrets omitted)."""

    __tablename__ = "audit_log"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False, index=True)
    actor: Mapped[str] = mapped_column(String(128), nullable=False)
    action: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    target: Mapped[str] = mapped_column(String(200), nullable=False, index=True)
    before: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    after: Mapped[dict | None] = mapped_column(JSON, nullable=True)

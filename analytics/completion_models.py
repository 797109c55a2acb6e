"""SQLAlchemy models of the completions' exclusion list (migration 0017; issue 42): what an admin
stopped from being offered under the search box (search.completions.Exclusions, admin.completions).

    completion_blocks         whole suggestions, by their normalised text (search.completions.completion_key)
    completion_blocked_words  single words (search.completions.blocked_word_key): a suggestion with one is
                              never offered, whatever its source

Written only by the admin's completions page, each change with its audit entry in one transaction;
read by every web worker with the popular searches (api.completions) and at once by the worker
that made the change.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.models import Base, utcnow


class CompletionBlock(Base):
    """A suggestion an admin blocked, by key; `text` as the page showed it."""

    __tablename__ = "completion_blocks"

    key: Mapped[str] = mapped_column(String(500), primary_key=True)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    created_by: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)


class CompletionBlockedWord(Base):
    """A word no suggestion may contain (its key: lower-case ASCII letters and digits)."""

    __tablename__ = "completion_blocked_words"

    word: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_by: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)

"""SQLAlchemy 2 models: the task catalog and the developer test cases.

`version` columns give optimistic concurrency: an edit based on a stale version fails instead
of silently overwriting somebody else's change. `StoreRevision` is bumped by every write so a
running search index knows cheaply when to rebuild.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class Task(Base):
    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(300), nullable=False)
    help: Mapped[str] = mapped_column(Text, nullable=False, default="")
    category: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    aliases: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    url: Mapped[str | None] = mapped_column(String(500), nullable=True)
    roles: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 onupdate=utcnow, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)

    __mapper_args__ = {"version_id_col": version}


class TestCase(Base):
    __tablename__ = "test_cases"
    __test__ = False  # not a pytest class
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    query: Mapped[str] = mapped_column(String(500), nullable=False, unique=True)
    gold: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    rationale: Mapped[str] = mapped_column(Text, nullable=False, default="")
    category: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow,
                                                 onupdate=utcnow, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)

    __mapper_args__ = {"version_id_col": version}


class StoreRevision(Base):
    """A single counter row per store ("catalog"), bumped in the same transaction as each write."""

    __tablename__ = "store_revision"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    revision: Mapped[int] = mapped_column(Integer, nullable=False, default=0)


class RankerFit(Base):
    """One per-catalog fit of the ranker (search.fitting): the parameters every serving process
    uses and the cross-validation figures that chose them. The newest row wins; older rows are
    the history. `cases_digest` names the test-case set it was fitted on."""

    __tablename__ = "ranker_fits"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    store_revision: Mapped[int] = mapped_column(Integer, nullable=False, index=True)
    cases_digest: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)
    params: Mapped[dict] = mapped_column(JSON, nullable=False)
    report: Mapped[dict] = mapped_column(JSON, nullable=False)


class CatalogVersion(Base):
    """One published change of the catalog and its test cases (and so of the lexicon, which is
    derived from the cases): who, when, what kind, and the per-record changeset
    `[{"kind": "task"|"case", "key": ..., "before": {...}|null, "after": {...}|null}]`.
    Written in the same transaction as the change (catalog.versions explains the design)."""

    __tablename__ = "catalog_versions"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False, index=True)
    actor: Mapped[str] = mapped_column(String(128), nullable=False)
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    message: Mapped[str] = mapped_column(String(500), nullable=False, default="")
    store_revision: Mapped[int] = mapped_column(Integer, nullable=False)
    rollback_of: Mapped[int | None] = mapped_column(Integer, nullable=True)
    changes: Mapped[list] = mapped_column(JSON, nullable=False)


class RecordChange(Base):
    """Which records a catalog version changed: one row per (version, record), written with the
    version (CatalogStore._publish; migration 0019 filled it from the versions before it). A
    record's history (CatalogStore.record_history) and the highest version a re-created task
    reached (CatalogStore._write) are read through it, not off every version's changeset."""

    __tablename__ = "record_changes"
    __table_args__ = (Index("ix_record_changes_record", "kind", "key"),)

    version_id: Mapped[int] = mapped_column(Integer, ForeignKey("catalog_versions.id", ondelete="CASCADE"),
                                            primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)   # a task id, a case id, a block's key


class LearnedBlock(Base):
    """A (normalised query, task) pair of learned evidence an admin blocked: the fit drops it.
    Created and removed only as published catalog versions (CatalogStore.block_learned,
    unblock_learned, rollback); migration 0009."""

    __tablename__ = "learned_blocks"

    query: Mapped[str] = mapped_column(String(500), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True, index=True)
    reason: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)

"""SQLAlchemy model of the offline evaluations started from the admin page (migration 0006).

A row per run, shared by every serving process through the database, so that whichever worker
answers the page shows the progress of a run that another worker is executing.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.models import Base, utcnow

RUN_STATUSES = ("queued", "running", "done", "failed")


class EvaluationRun(Base):
    __tablename__ = "evaluation_runs"
    __table_args__ = {"sqlite_autoincrement": True}  # ids never reused (migration 0018)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False, index=True)
    started_by: Mapped[str] = mapped_column(String(128), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="queued", index=True)
    progress: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)   # 0..1 of the whole run
    stage: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    report: Mapped[dict | None] = mapped_column(JSON, nullable=True)              # evaluation.evaluate's report
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The process executing the run touches this at least every HEARTBEAT_S; a queued or running
    # run whose heartbeat stopped belongs to a process that died (evaluation.runs).
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)

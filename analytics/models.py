"""SQLAlchemy models of search analytics (migration 0005): the search log and the widget's events.

No personal data: no IP address, no user agent, no account; only the opaque session id the
widget makes up (random, per browser tab or visit), the query text, normalised, and keyed lossy
pseudonyms: of the sender's network on events (16 bits), and of the verified person on searches
where the host verifies one (8 bits: 256 values in all; analytics.sources). There is no
foreign key from events to searches: the search log is written in the background, so an event
may arrive before its search is stored, and a search may have been dropped (full queue) or
purged; such events are kept and simply not counted (see analytics.formulas).
"""
from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import JSON, BigInteger, Boolean, CheckConstraint, Date, DateTime, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.models import Base

EVENT_TYPES = ("impression", "click", "dwell", "return")


class SearchLogEntry(Base):
    """One answered /api/search request."""

    __tablename__ = "search_log"
    __table_args__ = (Index("ix_search_log_session_at", "session_id", "at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)          # the response's search_id
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)
    session_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    query: Mapped[str] = mapped_column(Text, nullable=False)                # normalised (analytics.records)
    rerank: Mapped[bool] = mapped_column(Boolean, nullable=False)          # False: a type-ahead keystroke
    result_ids: Mapped[list] = mapped_column(JSON, nullable=False)          # task ids, in rank order
    no_confident_match: Mapped[bool] = mapped_column(Boolean, nullable=False)
    degraded: Mapped[list] = mapped_column(JSON, nullable=False)            # the response's degraded flags
    person: Mapped[str | None] = mapped_column(String(8), nullable=True)    # verified person's pseudonym (analytics.sources; migration 0012)


class SearchEvent(Base):
    """One event the widget reported about a search's results (POST /api/events)."""

    __tablename__ = "search_events"
    __table_args__ = (CheckConstraint("type IN ('impression', 'click', 'dwell', 'return')",
                                      name="ck_search_events_type"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True,
                                    autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)  # received
    session_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    search_id: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    type: Mapped[str] = mapped_column(String(16), nullable=False)
    task_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    position: Mapped[int | None] = mapped_column(Integer, nullable=True)    # click: 1-based rank
    dwell_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)    # dwell
    query: Mapped[str | None] = mapped_column(Text, nullable=True)          # impression, normalised
    task_ids: Mapped[list | None] = mapped_column(JSON, nullable=True)      # impression: what was shown
    network: Mapped[str | None] = mapped_column(String(32), nullable=True)  # keyed pseudonym (analytics.sources; migration 0010)


# -- daily roll-ups (migration 0007): what the analytics page reads ------------------------------
class MeasureColumns:
    """The counts of analytics.formulas.Measures, one column each (a mixin of the roll-up tables)."""

    searches: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    no_result: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    clicked: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    clicks: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    click_position_sum: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    abandoned: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    reformulated: Mapped[int] = mapped_column(Integer, nullable=False, default=0)


class RollupDay(MeasureColumns, Base):
    """One UTC day's totals (analytics.rollup). `final` once no late click can change it."""

    __tablename__ = "analytics_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    requests: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    sessionless_requests: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    unmatched_events: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    rolled_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    final: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)


class RollupQueryDay(MeasureColumns, Base):
    """One query's measures on one day."""

    __tablename__ = "analytics_query_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    query: Mapped[str] = mapped_column(Text, primary_key=True)


class RollupTaskDay(Base):
    """Per day, query and task: clicks on the task from searches for the query, and how often the
    task ended a reformulation chain that started from the query (its suggested-gold votes)."""

    __tablename__ = "analytics_task_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    query: Mapped[str] = mapped_column(Text, primary_key=True)
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    clicks: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    followups: Mapped[int] = mapped_column(Integer, nullable=False, default=0)

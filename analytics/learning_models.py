"""SQLAlchemy models of learning from use (migration 0008): aggregates only.

`learned_evidence`: one row per (normalised query, task) shown. The first seven columns are the
shared interface (analytics.learning.LearnedPair, read by the admin's editor); the two
`decayed_*` columns are the time-decayed sums the relevance is estimated from
(analytics.learning); the `*_sketch` columns keep `sessions`, `networks` and `people` distinct
across aggregation windows. `learning_state`: the aggregation's watermark.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, DateTime, Float, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog.models import Base


class LearnedEvidence(Base):
    __tablename__ = "learned_evidence"
    __table_args__ = (CheckConstraint("relevance >= 0 AND relevance <= 1", name="ck_learned_evidence_relevance"),
                      Index("ix_learned_evidence_task_id", "task_id"))

    query: Mapped[str] = mapped_column(Text, primary_key=True)              # normalised (lexicon.text)
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    sessions: Mapped[int] = mapped_column(Integer, nullable=False)          # distinct sessions that clicked
    clicks: Mapped[int] = mapped_column(Integer, nullable=False)            # counted clicks (one per session)
    examinations: Mapped[float] = mapped_column(Float, nullable=False)      # decayed sum of examination propensities
    relevance: Mapped[float] = mapped_column(Float, nullable=False)         # estimated P(relevant), [0, 1]
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    decayed_clicks: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    decayed_sessions: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    networks: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")  # migration 0010
    # Linear-counting sketches behind `sessions` and `networks` (migration 0011; search.learned.sketch_of):
    # 512 bits, one per 1/512 of all keys, no key stored. NULL: aggregated before them.
    session_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(64), nullable=True)
    # the networks' sketch has 4096 bits since migration 0016 (search.learned.NETWORK_SKETCH_BITS); a row
    # aggregated before keeps 512 (a wider sketch folds to it: search.learned.fold_sketch)
    network_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(512), nullable=True)
    # distinct verified people that clicked (migration 0012; analytics.sources.person_pseudonym), and its sketch
    people: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    people_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(64), nullable=True)
    # distinct sessions shown the task for the query, clicked or not, and their networks (migration 0013:
    # a query's viewers against its clickers say when nobody clicks it, analytics.learning.unclicked_queries)
    viewers: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    viewer_networks: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    viewer_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(64), nullable=True)
    viewer_network_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(64), nullable=True)
    # ... and their distinct verified people (migration 0014: how an office behind one address qualifies)
    viewer_people: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    viewer_people_sketch: Mapped[bytes | None] = mapped_column(LargeBinary(64), nullable=True)
    # of `clicks`, those made after rephrasing the query (migration 0015; analytics.learning.chain_votes)
    rephrased_clicks: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")


class LearningState(Base):
    __tablename__ = "learning_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

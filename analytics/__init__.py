"""Search analytics (issue 10): every search is logged, the widget reports what people did with
the results, and the admin sees the measures and the queries to turn into test cases.

    analytics.records   the plain records (a logged search, an event), search ids, query normalisation
    analytics.formulas  the measures as pure functions over those records (definitions in its docstring)
    analytics.models    the tables (migration 0005); analytics.store reads and writes them
    analytics.recorder  the background writer: bounded queue, batched flushes, retention purge, roll-ups
    analytics.rollup    daily roll-ups (pure): what the admin page reads instead of the raw log
    analytics.budget    flood caps of POST /api/events (per session, per address, everyone; in Redis)
    analytics.schema    validation of POST /api/events against openapi.json
    analytics.api       POST /api/events (blueprint `events`)
    analytics.pages     the admin pages under /admin/analytics (a blueprint nested in admin_bp)
    analytics.charts    server-rendered SVG chart geometry (pure)
    analytics.cli       `python app.py analytics purge|report`
"""
from __future__ import annotations

import hashlib

from flask import Flask
from limits.storage import Storage
from sqlalchemy import Engine

from analytics import pages  # noqa: F401  (nests the admin pages' blueprint in admin_bp)
from analytics.api import (BUDGET_EXTENSION, EXTENSION, PSEUDONYM_KEY_EXTENSION, SOURCES_EXTENSION,
                           analytics_recorder, events_bp, person_of)
from analytics.budget import build_event_budget
from analytics.recorder import AnalyticsRecorder
from analytics.sources import AddressSessions
from analytics.store import AnalyticsStore
from infra.secret_key import shared_secret_key
from web.metrics import Metrics
from settings import Settings

__all__ = ["analytics_recorder", "init_analytics", "person_of"]


def init_analytics(app: Flask, settings: Settings, engine: Engine, metrics: Metrics,
                   event_storage: Storage) -> AnalyticsRecorder:
    """Create this app's analytics writer and register POST /api/events."""
    recorder = AnalyticsRecorder(AnalyticsStore(engine), queue_size=settings.analytics_queue_size,
                                 flush_interval_s=settings.analytics_flush_interval_s,
                                 retention_days=settings.analytics_retention_days,
                                 enabled=settings.analytics_enabled, on_count=metrics.analytics_listener(),
                                 rollup_interval_s=settings.analytics_rollup_interval_s)
    app.extensions[EXTENSION] = recorder
    app.extensions[SOURCES_EXTENSION] = AddressSessions(settings.learning_sessions_per_address)
    # the flood caps of POST /api/events, shared by every worker through Redis (analytics.budget)
    app.extensions[BUDGET_EXTENSION] = build_event_budget(settings, event_storage)   # the caps' counts (analytics.budget)
    # the key of the network and person pseudonyms (analytics.sources): derived from SECRET_KEY, else
    # from the key file every process of this data directory shares (infra.secret_key), so that
    # all workers give one address one pseudonym (issue 33 item 2: a key per process made one
    # address two "networks" on gunicorn). Derived, so that the session-signing key itself is not
    # used for a second purpose; the two pseudonyms hash distinct messages under it.
    secret = settings.secret_key or shared_secret_key(settings.data_dir)
    app.extensions[PSEUDONYM_KEY_EXTENSION] = hashlib.sha256(
        b"taskfinder network pseudonym\0" + secret.encode("utf-8")).digest()
    app.register_blueprint(events_bp)
    return recorder


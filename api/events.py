"""POST /api/events: what the search widget saw and did with a search's results.

Body: `{"session_id": "<opaque>", "events": [{"type": "impression" | "click" | "dwell" | "return",
"search_id": ..., ...}]}`, at most MAX_BODY_BYTES and 50 events, validated against openapi.json
(analytics.schema); 202 `{"accepted": n}` (n: events stored; a repeated impression is not);
429 over a flood cap (analytics.budget: per session, per address, everyone; shared by every
worker through Redis). The body is JSON sent as application/json or as
text/plain, the type navigator.sendBeacon uses for a string (a "simple" request: no CORS
preflight, and it survives the page being closed).

The request may carry the host's role token as /api/search takes it (`Authorization: Bearer`,
or `?role_token=`, the form a beacon can send; widget/static/widget.js sends it with both): when
it verifies a person (`sub`), the per-address session cap counts that person's sessions apart
from the rest of their address's (analytics.sources.gate_key). What a vote counts for is still
the person verified by its *search* (analytics.learning), never anything an event says.

Unknown search ids are accepted: the search log is written in the background by every worker,
so a click can arrive before its search is stored, and a search may have been dropped (full
queue) or purged. Such events are stored and purged like the others; the measures count only
events whose search is in the log (analytics.formulas.intents), and the analytics page shows
how many were not matched. A made-up id therefore cannot change any measure.

`init_analytics` (called by create_app) gives the app its analytics writer (analytics.recorder)
and what this endpoint needs; /api/search (api.search) queues its searches through
`analytics_recorder()` and `person_of`. The log, the measures and the writer themselves are in
analytics/, which knows nothing of HTTP.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from limits.storage import Storage
from sqlalchemy import Engine

from analytics.budget import Admission, build_event_budget
from analytics.recorder import AnalyticsRecorder, RecorderConfig
from analytics.schema import MAX_BODY_BYTES, EventBatch, EventError, parse_batch
from analytics.sources import AddressSessions, gate_key, network_pseudonym, person_pseudonym
from analytics.store import AnalyticsStore
from api.roles import resolve_access
from infra.secret_key import shared_secret_key
from web.limits import request_client
from infra.metrics import Metrics
from catalog.models import utcnow
from catalog.validation import JSONRefused, decode_json
from settings import Settings

events_bp = Blueprint("events", __name__)
EXTENSION = "taskfinder_analytics"   # app.extensions key of the app's AnalyticsRecorder
SOURCES_EXTENSION = "taskfinder_sessions_per_address"   # analytics.sources.AddressSessions
BUDGET_EXTENSION = "taskfinder_event_budget"   # ... and of its analytics.budget.EventBudget
PSEUDONYM_KEY_EXTENSION = "taskfinder_pseudonym_key"     # the key of analytics.sources' pseudonyms

ACCEPTED_TYPES = ("application/json", "text/plain")
RETRY_AFTER_S = 5


def init_analytics(app: Flask, settings: Settings, engine: Engine, metrics: Metrics,
                   event_storage: Storage) -> AnalyticsRecorder:
    """Create this app's analytics writer and what POST /api/events needs (its flood caps, the
    per-address session gate, the pseudonyms' key). create_app registers `events_bp` itself."""
    recorder = AnalyticsRecorder(AnalyticsStore(engine),
                                 RecorderConfig(queue_size=settings.analytics_queue_size,
                                                flush_interval_s=settings.analytics_flush_interval_s,
                                                retention_days=settings.analytics_retention_days,
                                                rollup_interval_s=settings.analytics_rollup_interval_s,
                                                enabled=settings.analytics_enabled),
                                 on_count=metrics.analytics_listener())
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
    return recorder


def analytics_recorder() -> AnalyticsRecorder:
    """The current app's analytics writer (init_analytics)."""
    return current_app.extensions[EXTENSION]


def error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message}), status


def person_of(subject: str | None) -> str | None:
    """The keyed pseudonym the search log keeps of a verified person (analytics.sources)."""
    key = current_app.extensions.get(PSEUDONYM_KEY_EXTENSION)
    return person_pseudonym(subject, key) if key else None


def bind_to_address(batch: EventBatch) -> EventBatch:
    """The batch as stored: each event with the keyed pseudonym of the caller's network,
    and without its session id when the caller's address (or the verified person, gate_key) has
    brought too many sessions this hour (analytics.sources; the address itself is never stored)."""
    settings = current_app.extensions["taskfinder"].settings
    address = request_client(settings)
    key = current_app.extensions.get(PSEUDONYM_KEY_EXTENSION)
    network = network_pseudonym(address, key) if key else None
    gate: AddressSessions | None = current_app.extensions.get(SOURCES_EXTENSION)
    # the token is verified only where the cap asks who sent it: a batch with a session id
    admitted = gate is None or not batch.session_id or gate.admit(
        gate_key(address, resolve_access(settings, request.headers, request.args, request.remote_addr).subject),
        batch.session_id)
    return EventBatch(batch.session_id if admitted else None,
                      tuple(replace(e, network=network, session_id=e.session_id if admitted else None)
                            for e in batch.events))


def over_cap(admission: Admission) -> tuple[Response, int]:
    """429 naming the cap the request is over (analytics.budget), with Retry-After."""
    who = {"session": "this session", "address": "this address", "network": "this network"}.get(
        admission.refused_by, "everyone")
    response, status = error(429, f"too many events from {who} in the last minute; nothing was stored; "
                                  f"retry in {admission.retry_after_s} s")
    response.headers["Retry-After"] = str(admission.retry_after_s)
    return response, status


def read_body(limit: int) -> bytes | None:
    """The request body, or None when it is longer than `limit` bytes (read no further)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    body = request.stream.read(limit + 1)
    return None if len(body) > limit else body


@events_bp.post("/api/events")
def post_events():
    if request.mimetype not in ACCEPTED_TYPES:
        return error(415, f"send the events as JSON (Content-Type: {' or '.join(ACCEPTED_TYPES)}), "
                          f"not {request.mimetype or 'no content type'}")
    body = read_body(MAX_BODY_BYTES)
    if body is None:
        return error(413, f"the body is larger than {MAX_BODY_BYTES} bytes; send fewer events per request")
    try:
        payload = decode_json(body.decode("utf-8"))
    except JSONRefused as exc:   # a lone surrogate, a key's included: named, never echoed
        return error(400, str(exc) if exc.field else f"the body {exc.problem}")
    except (UnicodeDecodeError, ValueError) as exc:
        return error(400, f"the body is not valid JSON: {exc}")
    try:
        batch = parse_batch(payload, utcnow())
    except EventError as exc:
        return error(400, str(exc))
    batch = bind_to_address(batch)
    rec = analytics_recorder()
    if not rec.enabled:
        return jsonify({"accepted": 0}), 202
    settings = current_app.extensions["taskfinder"].settings
    admission = current_app.extensions[BUDGET_EXTENSION].admit(request_client(settings), batch.session_id,
                                                               batch.events)
    if admission.refused_by is not None:   # a flood (analytics.budget): refused whole, nothing stored
        rec.refused(len(batch.events))
        return over_cap(admission)
    events = admission.events
    if events and not rec.record_events(events):
        response, status = error(503, "the analytics buffer is full; retry later")
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response, status
    return jsonify({"accepted": len(events)}), 202

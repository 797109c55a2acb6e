"""RED metrics (rate, errors, duration) for every HTTP endpoint, recorded around each request
rather than in each view, so that a new endpoint, a 404 or an unhandled exception's 500 is
counted without anyone remembering to.

The `endpoint` label is the matched route template (`/api/search`, `/admin/tasks/<task_id>`),
never the raw path: a path can carry ids or attacker-chosen text and would give every distinct
URL its own time series. Requests that match no route are labelled `unmatched`.

It is WSGI middleware around the Flask app (`app.wsgi_app`), not a pair of before/after-request
hooks: the duration then covers all of Flask's work on the request (context, routing, every
hook, the error handlers), and a cached type-ahead answer does not pay for two more hooks and
their request-context lookups (docs/design/performance.md).
"""
from __future__ import annotations

import time

from flask import Flask

from infra.metrics import Metrics

UNMATCHED = "unmatched"
REQUEST_KEY = "werkzeug.request"   # where werkzeug keeps the request object in the WSGI environ


def route_label(request) -> str:
    """The matched route template of a Flask request (or None), else UNMATCHED."""
    rule = getattr(request, "url_rule", None)
    return rule.rule if rule is not None else UNMATCHED


class RequestMetrics:
    """WSGI middleware recording one request count and duration per response, labelled by route
    template and status. Flask calls start_response while the request context is still live, so
    the matched rule is read there; an exception that escapes Flask is counted as a 500."""

    def __init__(self, wsgi_app, metrics: Metrics):
        self.wsgi_app = wsgi_app
        self.metrics = metrics

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        seen: list[tuple[str, int]] = []

        def recording_start_response(status, headers, exc_info=None):
            seen.append((route_label(environ.get(REQUEST_KEY)), int(status[:3])))
            return start_response(status, headers, exc_info)

        escaped = True
        try:
            body = self.wsgi_app(environ, recording_start_response)
            escaped = False
            return body
        finally:
            endpoint, status = seen[-1] if seen else (UNMATCHED, 500)
            self.metrics.observe_request(endpoint, 500 if escaped else status, time.perf_counter() - started)


def install_request_metrics(app: Flask, metrics: Metrics) -> None:
    """Wrap `app.wsgi_app`: install it last, so that it wraps every other middleware too."""
    app.wsgi_app = RequestMetrics(app.wsgi_app, metrics)

"""RED metrics (rate, errors, duration) for every HTTP endpoint, recorded around each request
rather than in each view, so that a new endpoint, a 404 or an unhandled exception's 500 is
counted without anyone remembering to.

The `endpoint` label is the matched route template (`/api/search`, `/admin/tasks/<task_id>`),
never the raw path: a path can carry ids or attacker-chosen text and would give every distinct
URL its own time series. Requests that match no route are labelled `unmatched`.
"""
from __future__ import annotations

import time

from flask import Flask, Response, g, request

from observability.metrics import Metrics

UNMATCHED = "unmatched"


def route_label() -> str:
    rule = request.url_rule
    return rule.rule if rule is not None else UNMATCHED


def install_request_metrics(app: Flask, metrics: Metrics) -> None:
    """Time every request from the first before_request hook to after_request. Flask runs
    after_request for the responses of error handlers too, including the 500 handler of an
    unhandled exception, so server errors are counted with their real status."""

    @app.before_request
    def start_timer() -> None:
        g.taskfinder_request_started = time.perf_counter()

    @app.after_request
    def record(response: Response) -> Response:
        started = g.pop("taskfinder_request_started", None)
        seconds = time.perf_counter() - started if started is not None else None
        metrics.observe_request(route_label(), response.status_code, seconds)
        return response

"""The load test's ceiling: a bare Flask app answering GET /api/search with one canned body.

    CANNED_BODY_PATH=body.json gunicorn -k gthread -w 2 --threads 4 'ops.canned_app:create_canned_app()'

ops/loadtest.py serves it under the same server, worker class, worker and thread count as the
real app, with the body of a real type-ahead answer, so that "hot type-ahead req/s divided by
this app's req/s" says how much of the HTTP stack's capacity the search itself leaves.
"""
from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, Response


def create_canned_app(body_path: str | None = None) -> Flask:
    body = Path(body_path or os.environ["CANNED_BODY_PATH"]).read_bytes()
    app = Flask(__name__)

    @app.get("/api/search")
    def canned() -> Response:
        return Response(body, mimetype="application/json")

    return app
